//! Compaction as the loop uses it: micro-compaction, the replacement history,
//! and a session that resumes from its last compaction entry while the full
//! transcript stays on disk.

use ferroclaw_core::SessionStore;
use ferroclaw_core::compaction::{compacted_history, compaction_entry};
use ferroclaw_core::session::{RESUME_TAIL_BYTES, SessionLog, for_each_entry};
use ferroclaw_protocol::Message;

#[test]
fn a_resumed_session_starts_from_its_last_compaction() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::new(home.path());
    let mut log = store.create(std::path::Path::new("/p"), "m/m").unwrap();
    for i in 0..10 {
        log.append_message(&Message::user(format!("q{i}"))).unwrap();
        log.append_message(&Message::assistant(format!("a{i}"))).unwrap();
    }
    let history = compacted_history("## Goal\nfirst summary", log.path(), None, None);
    log.append(&compaction_entry(&history, 20)).unwrap();
    log.append_message(&Message::user("q10")).unwrap();
    log.append_message(&Message::assistant("a10")).unwrap();
    let history =
        compacted_history("## Goal\nsecond summary", log.path(), Some("[ ] ship".into()), None);
    log.append(&compaction_entry(&history, 3)).unwrap();
    log.append_message(&Message::user("q11")).unwrap();
    log.append_message(&Message::assistant("a11")).unwrap();
    log.sync().unwrap();
    let path = log.path().to_path_buf();
    drop(log);

    let resumed = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
    // The summary and the next request are user turns in a row: merged on load.
    assert_eq!(resumed.messages.len(), 2, "{:?}", resumed.messages);
    let mut merged = history[0].clone();
    merged.content.extend(Message::user("q11").content);
    assert_eq!(resumed.messages[0], merged);
    assert!(resumed.messages[0].text().contains("second summary"));
    assert!(resumed.messages[0].text().contains("[ ] ship"));
    assert_eq!(resumed.messages[1], Message::assistant("a11"));

    // Lossless on disk: every message is still in the file.
    let mut messages = 0;
    for_each_entry(&path, |e| {
        if matches!(e, ferroclaw_core::session::Entry::Message { .. }) {
            messages += 1;
        }
    })
    .unwrap();
    assert_eq!(messages, 24);
}
