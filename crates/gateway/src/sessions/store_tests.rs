//! What a reader notices of the chats' sessions and the conversations'
//! titles, the same whichever store keeps them: each case runs against the
//! files and the database alike.

use std::future::Future;

use ferroclaw_store::PgStore;

use super::*;

/// A chat's session and a conversation's title, set through one handle,
/// read back by a handle opened afterwards (`reopen`): the record names the
/// chat's session and its chat; a title is trimmed, cut, and removed when
/// empty.
async fn keep_names_and_titles<F, Fut>(names: &SessionNames, titles: &SessionTitles, reopen: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = (SessionNames, SessionTitles)>,
{
    let key = SessionKey::new("web", "page-1");
    assert_eq!(names.recorded(&key).await.unwrap(), "gw-web-page-1", "the base session first");
    names.record(&key, "gw-web-page-1-1767225600000").await.unwrap();
    titles.set("gw-web-page-1", "  Trip to Lisbon ").await.unwrap();
    titles.set("gw-web-other", &"x".repeat(MAX_TITLE_CHARS + 10)).await.unwrap();

    let (names, titles) = reopen().await;
    assert_eq!(names.recorded(&key).await.unwrap(), "gw-web-page-1-1767225600000");
    let all = names.all_recorded().await.unwrap();
    assert_eq!(chat_of_in(&all, "gw-web-page-1-1767225600000"), Some(key.clone()));
    assert_eq!(chat_of_in(&all, "gw-web-page-1"), None, "the old session is read-only now");
    let other = SessionKey::new("web", "page-2");
    assert_eq!(names.recorded(&other).await.unwrap(), "gw-web-page-2");
    assert_eq!(titles.get("gw-web-page-1").await.unwrap().as_deref(), Some("Trip to Lisbon"));
    let long = titles.get("gw-web-other").await.unwrap().unwrap();
    assert_eq!(long.chars().count(), MAX_TITLE_CHARS);
    assert_eq!(titles.all().await.unwrap().len(), 2);

    titles.set("gw-web-page-1", " ").await.unwrap();
    let (_, titles) = reopen().await;
    assert_eq!(titles.get("gw-web-page-1").await.unwrap(), None, "an empty title removes it");
    assert_eq!(titles.all().await.unwrap().keys().collect::<Vec<_>>(), ["gw-web-other"]);
}

#[tokio::test]
async fn the_files_keep_names_and_titles() {
    let home = tempfile::tempdir().unwrap();
    let open = || async { (SessionNames::load(home.path()), SessionTitles::load(home.path())) };
    let (names, titles) = open().await;
    keep_names_and_titles(&names, &titles, open).await;
}

#[tokio::test]
async fn the_database_keeps_names_and_titles() {
    let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
    let url = pg.database("session_records");
    let home = tempfile::tempdir().unwrap();
    let open = || async {
        let db = PgStore::connect(&url, Default::default()).await.unwrap();
        (SessionNames::database(db.clone(), Some(home.path())), SessionTitles::database(db))
    };
    let (names, titles) = open().await;
    keep_names_and_titles(&names, &titles, open).await;
}
