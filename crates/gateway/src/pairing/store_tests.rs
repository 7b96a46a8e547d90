//! What a sender and the owner notice of pairing, the same whichever store
//! keeps it: each case runs against the files and the database alike.

use ferroclaw_store::PgStore;

use super::*;

fn settings(policy: DmPolicy) -> ChannelSettings {
    ChannelSettings {
        name: "telegram".into(),
        enabled: true,
        dm_policy: policy,
        ..Default::default()
    }
}

fn senders(state: &PairingState) -> Vec<&str> {
    state.approved.iter().map(|a| a.sender.as_str()).collect()
}

/// An unknown sender gets a code and is let in once the owner approves it,
/// on any store opened on the same place (`reopened`); a denied code is
/// forgotten; a revoked sender must pair again; an allow-list never pairs.
async fn lets_in_whom_the_owner_approves(store: &PairingStore, reopened: &PairingStore) {
    let pairing = settings(DmPolicy::Pairing);
    let msg = InboundMessage::new("telegram", "42", "42", "hi");
    let Admission::Refuse(Some(text)) = store.admit(&pairing, &msg).await else {
        panic!("an unknown sender must be refused");
    };
    let waiting = reopened.load("telegram").await.unwrap().pending;
    assert_eq!(waiting.len(), 1);
    let code = waiting[0].code.clone();
    assert!(text.contains(&code), "{text}");
    let again = reopened.request("telegram", "42", "42", None).await.unwrap();
    assert_eq!(again.code, code, "the same sender keeps the same code");
    assert!(!reopened.is_approved("telegram", "42").await);
    assert_eq!(reopened.approve("telegram", &code.to_lowercase()).await.unwrap().sender, "42");
    assert_eq!(store.admit(&pairing, &msg).await, Admission::Allow);
    assert!(store.approve("telegram", &code).await.is_err(), "a code works once");
    assert_eq!(senders(&store.load("telegram").await.unwrap()), ["42"]);

    let other = store.request("telegram", "99", "99", Some("Eve".into())).await.unwrap();
    assert_eq!(other.name.as_deref(), Some("Eve"));
    assert_eq!(reopened.deny("telegram", &other.code).await.unwrap().sender, "99");
    assert!(store.load("telegram").await.unwrap().pending.is_empty());
    assert!(!store.is_approved("telegram", "99").await);
    let denied = store.approve("telegram", &other.code).await;
    assert!(matches!(denied, Err(PairingError::UnknownCode { .. })), "a denied code is gone");

    let stranger = InboundMessage::new("telegram", "7", "7", "hi");
    let listed = settings(DmPolicy::Allowlist);
    assert!(matches!(store.admit(&listed, &stranger).await, Admission::Refuse(Some(_))));
    assert!(store.load("telegram").await.unwrap().pending.is_empty(), "an allow-list never pairs");

    assert!(store.revoke("telegram", "42").await.unwrap());
    assert!(!store.revoke("telegram", "42").await.unwrap());
    assert!(!reopened.is_approved("telegram", "42").await);
    let Admission::Refuse(Some(text)) = store.admit(&pairing, &msg).await else {
        panic!("a revoked sender must pair again");
    };
    assert!(text.contains("pairing code"), "{text}");
    assert_eq!(reopened.channels().await.unwrap(), ["telegram"]);
    assert!(matches!(store.load("../etc").await, Err(PairingError::BadChannel(_))));
}

#[tokio::test]
async fn the_files_let_in_whom_the_owner_approves() {
    let home = tempfile::tempdir().unwrap();
    let (store, reopened) = (PairingStore::new(home.path()), PairingStore::new(home.path()));
    lets_in_whom_the_owner_approves(&store, &reopened).await;
}

#[tokio::test]
async fn the_database_lets_in_whom_the_owner_approves() {
    let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
    let url = pg.database("pairing_store");
    let open = || async {
        PairingStore::database(PgStore::connect(&url, Default::default()).await.unwrap())
    };
    lets_in_whom_the_owner_approves(&open().await, &open().await).await;
}
