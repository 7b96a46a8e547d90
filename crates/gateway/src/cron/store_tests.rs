//! What a user notices of the cron jobs, the same whichever store keeps
//! them: each case runs against the jobs file and the database alike.

use ferroclaw_store::PgStore;

use super::*;

fn every_minute(message: &str) -> CronJob {
    let payload = Payload { message: message.into(), ..Default::default() };
    CronJob::new(message, Schedule::every(60_000).unwrap(), payload).unwrap()
}

/// Jobs added are listed, in order, by any store opened on the same place
/// (`reopened`); one is made due now, a failed change writes nothing, and
/// one is removed by a prefix of its id.
async fn keeps_jobs(store: &CronStore, reopened: &CronStore) {
    assert!(store.load().await.unwrap().jobs.is_empty());
    let stretch = store.add(every_minute("stretch")).await.unwrap();
    let report = Payload {
        message: "the weekly report".into(),
        deliver: true,
        channel: Some("telegram".into()),
        to: Some("42".into()),
    };
    let weekdays = Schedule::cron("0 9 * * 1-5", Some("Europe/Paris")).unwrap();
    let report = store.add(CronJob::new("report", weekdays, report).unwrap()).await.unwrap();
    assert_eq!(reopened.load().await.unwrap().jobs, [stretch.clone(), report.clone()]);

    let due = store.run_now(&stretch.id).await.unwrap();
    assert!(due.state.next_run_at_ms.is_some_and(|at| at <= now_ms()));
    assert_eq!(reopened.load().await.unwrap().jobs[0].state, due.state, "due for every reader");

    let failed = store
        .update(|file| {
            file.jobs.clear();
            Err::<(), _>(CronError::NotFound("on purpose".into()))
        })
        .await;
    assert!(matches!(failed, Err(CronError::NotFound(_))));
    assert_eq!(reopened.load().await.unwrap().jobs.len(), 2, "a failed change writes nothing");

    assert!(matches!(store.remove("no-such-job").await, Err(CronError::NotFound(_))));
    assert_eq!(store.remove(&report.id[..6]).await.unwrap(), report);
    assert_eq!(reopened.load().await.unwrap().jobs, [due]);
}

#[tokio::test]
async fn the_jobs_file_keeps_jobs() {
    let home = tempfile::tempdir().unwrap();
    keeps_jobs(&CronStore::new(home.path()), &CronStore::new(home.path())).await;
}

#[tokio::test]
async fn the_database_keeps_jobs() {
    let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
    let url = pg.database("cron_store");
    let open =
        || async { CronStore::database(PgStore::connect(&url, Default::default()).await.unwrap()) };
    keeps_jobs(&open().await, &open().await).await;
}
