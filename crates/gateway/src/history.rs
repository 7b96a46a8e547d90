//! The one read path for what people read of their conversations: the list
//! (the web app's sidebar and `/api/sessions`), each conversation's entries
//! (`/api/sessions/{id}`, `ferroclaw sessions show`), the pictures in them,
//! the session a chat talks in now, and the titles people gave them.
//!
//! One gateway on its own files reads its session files, as it writes them.
//! Several gateways on one database (`[gateway] store`) read the database
//! they write ([`ferroclaw_store::PgStore`]): never this process's copy of a
//! session, which is brought up to date only when a turn of that chat runs
//! here and so can lag behind what other processes stored. A gateway that
//! starts, or restarts after a kill, shows every conversation at once, and
//! every gateway shows the same list and the same histories.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferroclaw_core::SessionStore;
use ferroclaw_core::session::{Entry, SessionError, SessionSummary, for_each_entry};
use ferroclaw_protocol::ContentBlock;
use ferroclaw_runtime::Runtime;
use ferroclaw_store::{PgStore, StoreError, StoredConversation};

use crate::sessions::{SessionKey, SessionNames, SessionRecordError, SessionTitles, chat_of_in};

/// The prefix of the gateway's conversations' ids (sub-agents' transcripts
/// and terminal sessions have others).
pub const CONVERSATION_PREFIX: &str = "gw-";
/// Characters of a first request shown as a conversation's title.
const TITLE_CHARS: usize = 80;

/// Why a conversation could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Session(#[from] SessionError),
    #[error("{0}")]
    Record(#[from] SessionRecordError),
    #[error("reading sessions stopped: {0}")]
    Task(String),
}

/// A conversation as a list shows it.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// Id, when it began, model, first request, size, last change.
    pub summary: SessionSummary,
    /// The title given to it (else its first request is shown).
    pub title: Option<String>,
    /// The chat that talks in it now (`None`: no chat does any more).
    pub chat: Option<SessionKey>,
}

/// Where conversations are read from.
#[derive(Clone)]
enum Source {
    /// This gateway's session files (it is the only writer).
    Files { sessions: SessionStore, workspace: PathBuf },
    /// The database every gateway writes.
    Store(Box<PgStore>),
}

/// The read path; cheap to make (one per request).
#[derive(Clone)]
pub struct History {
    source: Source,
    /// Which session each chat talks in (in database mode, by the
    /// database, else by this process's names).
    names: SessionNames,
    /// The titles people gave conversations.
    titles: SessionTitles,
}

impl History {
    /// A running gateway's: its database (`store`) when it shares one, else
    /// its files (`runtime`'s sessions); its chats' `names` and `titles`.
    pub fn of(
        store: Option<&PgStore>,
        runtime: &Runtime,
        titles: &SessionTitles,
        names: &SessionNames,
    ) -> History {
        let source = match store {
            Some(store) => Source::Store(Box::new(store.clone())),
            None => Source::Files {
                sessions: runtime.sessions().clone(),
                workspace: runtime.config().workspace.clone(),
            },
        };
        History { source, names: names.clone(), titles: titles.clone() }
    }

    /// The database's, for commands that run beside the gateways
    /// (`ferroclaw sessions` with a shared store configured).
    pub fn shared(store: PgStore) -> History {
        History {
            names: SessionNames::database(store.clone(), None),
            titles: SessionTitles::database(store.clone()),
            source: Source::Store(Box::new(store)),
        }
    }

    /// True when this reads the shared database.
    pub fn is_shared(&self) -> bool {
        matches!(self.source, Source::Store(_))
    }

    /// The gateway's conversations, newest first, at most `limit`.
    pub async fn conversations(&self, limit: usize) -> Result<Vec<Conversation>, HistoryError> {
        match &self.source {
            Source::Files { sessions, workspace } => {
                let (sessions, workspace) = (sessions.clone(), workspace.clone());
                let mut all = blocking(move || Ok(sessions.list(&workspace))).await?;
                all.retain(|s| s.id.starts_with(CONVERSATION_PREFIX));
                all.truncate(limit);
                let (mut titles, current) =
                    (self.titles.all().await?, self.names.all_recorded().await?);
                Ok(all
                    .into_iter()
                    .map(|summary| Conversation {
                        title: titles.remove(&summary.id),
                        chat: chat_of_in(&current, &summary.id),
                        summary,
                    })
                    .collect())
            }
            Source::Store(store) => {
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let stored = store.conversations(CONVERSATION_PREFIX, limit).await?;
                let current = self.names.all_recorded().await?;
                Ok(stored
                    .into_iter()
                    .map(summary_of)
                    .filter(|c| c.summary.parent.is_none())
                    .map(|mut c| {
                        c.chat = chat_of_in(&current, &c.summary.id);
                        c
                    })
                    .collect())
            }
        }
    }

    /// Conversations whose messages say `words` (any case), at most
    /// `limit`, each with a snippet around the first place; `None` when
    /// this reads files (the recall index searches them).
    pub async fn search(
        &self,
        words: &str,
        limit: usize,
    ) -> Result<Option<Vec<(String, String)>>, HistoryError> {
        let Source::Store(store) = &self.source else { return Ok(None) };
        let lines = store.lines_holding(CONVERSATION_PREFIX, words, SEARCH_LINES).await?;
        let mut found: Vec<(String, String)> = Vec::new();
        for (session, line) in lines {
            if found.len() >= limit || found.iter().any(|(s, _)| *s == session) {
                continue;
            }
            let Ok(Entry::Message { message, .. }) = serde_json::from_str::<Entry>(&line) else {
                continue;
            };
            if let Some(snippet) = snippet(&message.text(), words) {
                found.push((session, snippet));
            }
        }
        Ok(Some(found))
    }

    /// The conversation `id` as listed, if there is one.
    pub async fn conversation(&self, id: &str) -> Result<Option<Conversation>, HistoryError> {
        match &self.source {
            Source::Files { .. } => {
                let all = self.conversations(usize::MAX).await?;
                Ok(all.into_iter().find(|c| c.summary.id == id))
            }
            Source::Store(store) => {
                let Some(stored) = store.conversation(id).await? else { return Ok(None) };
                let current = self.names.all_recorded().await?;
                let mut found = summary_of(stored);
                found.chat = chat_of_in(&current, id);
                Ok(Some(found))
            }
        }
    }

    /// The entries of conversation `id`, in order; `None` when there is none.
    /// Lines that do not parse are skipped (and logged).
    pub async fn entries(&self, id: &str) -> Result<Option<Vec<Entry>>, HistoryError> {
        match &self.source {
            Source::Files { sessions, workspace, .. } => {
                let path = sessions.path_of(workspace, id);
                blocking(move || {
                    if !path.is_file() {
                        return Ok(None);
                    }
                    let mut entries = Vec::new();
                    for_each_entry(&path, |e| entries.push(e))?;
                    Ok(Some(entries))
                })
                .await
            }
            Source::Store(store) => {
                if store.session_head(id).await?.is_none() {
                    return Ok(None);
                }
                let lines = store.session_lines_after(id, 0).await?;
                Ok(Some(parse_lines(id, &lines)))
            }
        }
    }

    /// True when conversation `id` exists.
    pub async fn exists(&self, id: &str) -> Result<bool, HistoryError> {
        match &self.source {
            Source::Files { sessions, workspace, .. } => {
                Ok(sessions.path_of(workspace, id).is_file())
            }
            Source::Store(store) => Ok(store.session_head(id).await?.is_some()),
        }
    }

    /// Picture number `n` (from 0, in order of the conversation's messages)
    /// of conversation `id`: its media type and bytes.
    pub async fn picture(
        &self,
        id: &str,
        n: usize,
    ) -> Result<Option<(String, Vec<u8>)>, HistoryError> {
        let Some(entries) = self.entries(id).await? else { return Ok(None) };
        let found = pictures(&entries).nth(n).map(|(media_type, data)| {
            (media_type.to_string(), BASE64.decode(data).unwrap_or_default())
        });
        Ok(found.filter(|(_, bytes)| !bytes.is_empty()))
    }

    /// The session `key` talks in now.
    pub async fn current_session(&self, key: &SessionKey) -> Result<String, HistoryError> {
        Ok(self.names.recorded(key).await?)
    }

    /// Names conversation `id` (an empty title gives back its first
    /// request); the title it has now.
    pub async fn rename(&self, id: &str, title: &str) -> Result<Option<String>, HistoryError> {
        self.titles.set(id, title).await?;
        Ok(self.titles.get(id).await?)
    }
}

/// Lines a search looks at, at most (the matching lines of the newest
/// conversations first).
const SEARCH_LINES: i64 = 2_000;
/// Characters of a snippet on each side of what was found.
const SNIPPET_CHARS: usize = 40;

/// `text` around the first place it says `words` (any case), on one line.
fn snippet(text: &str, words: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let at = lower.find(&words.to_lowercase())?;
    // Lower-casing can change byte lengths: count in characters.
    let start = lower[..at].chars().count();
    let chars: Vec<char> = text.chars().collect();
    let from = start.saturating_sub(SNIPPET_CHARS);
    let to = (start + words.chars().count() + SNIPPET_CHARS).min(chars.len());
    let mut out: String = chars[from.min(chars.len())..to].iter().collect();
    out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if from > 0 {
        out.insert(0, '…');
    }
    if to < chars.len() {
        out.push('…');
    }
    Some(out)
}

/// The pictures of `entries`' messages in order: (media type, base64 data).
pub fn pictures(entries: &[Entry]) -> impl Iterator<Item = (&str, &str)> {
    entries
        .iter()
        .filter_map(|e| match e {
            Entry::Message { message, .. } => Some(&message.content),
            _ => None,
        })
        .flatten()
        .filter_map(|block| match block {
            ContentBlock::Image { media_type, data } => Some((media_type.as_str(), data.as_str())),
            _ => None,
        })
}

/// Runs file reads on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HistoryError> + Send + 'static,
) -> Result<T, HistoryError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| HistoryError::Task(e.to_string()))?
}

/// Stored lines as entries; a line that does not parse is skipped and
/// logged, as the files' reader does.
fn parse_lines(id: &str, lines: &[String]) -> Vec<Entry> {
    let mut entries = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Entry>(line) {
            Ok(entry) => entries.push(entry),
            // A line of a type a newer version writes: not for us.
            Err(_) if serde_json::from_str::<serde_json::Value>(line).is_ok() => {}
            Err(e) => tracing::warn!(session = %id, "line {} skipped: {e}", i + 1),
        }
    }
    entries
}

/// A stored conversation as a list shows it.
fn summary_of(stored: StoredConversation) -> Conversation {
    let meta = stored.meta.as_deref().and_then(|line| match serde_json::from_str(line) {
        Ok(Entry::Meta(meta)) => Some(meta),
        _ => None,
    });
    let first = stored.first_request.as_deref().map(json_string_start).unwrap_or_default();
    let summary = SessionSummary {
        id: stored.session.clone(),
        path: PathBuf::new(),
        created: meta.as_ref().map(|m| m.created.clone()).unwrap_or_default(),
        model: meta.as_ref().map(|m| m.model.clone()).unwrap_or_default(),
        title: first.lines().next().unwrap_or_default().chars().take(TITLE_CHARS).collect(),
        bytes: u64::try_from(stored.bytes).unwrap_or(0),
        modified: u64::try_from(stored.modified).unwrap_or(0),
        parent: meta.and_then(|m| m.parent),
    };
    Conversation { summary, title: stored.title, chat: None }
}

/// The text of the start of a JSON string (its inside, escapes whole, maybe
/// cut): decoded, with a cut escape (half a surrogate pair) left off.
fn json_string_start(inside: &str) -> String {
    let mut end = inside.len();
    loop {
        if let Ok(text) = serde_json::from_str::<String>(&format!("\"{}\"", &inside[..end])) {
            return text;
        }
        match inside[..end].rfind('\\') {
            Some(i) => end = i,
            None => return String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_request_cut_inside_an_escape_still_reads() {
        assert_eq!(
            json_string_start(r#"plan a \"trip\"\nto Lisbon"#),
            "plan a \"trip\"\nto Lisbon"
        );
        assert_eq!(json_string_start(r"smile \ud83d\ude00"), "smile \u{1f600}");
        assert_eq!(json_string_start(r"cut \ud83d"), "cut ");
        assert_eq!(json_string_start(""), "");
    }

    #[tokio::test]
    async fn the_database_lists_conversations_by_their_first_request_whatever_their_lines() {
        let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
        let store =
            PgStore::connect(&pg.database("history_list"), Default::default()).await.unwrap();
        let meta = |id: &str| {
            format!(
                r#"{{"type":"meta","id":"{id}","cwd":"/w","model":"m1","created":"2026-12-06T03:00:00Z","version":1}}"#
            )
        };
        let user = |text: &str| {
            serde_json::to_string(&Entry::Message {
                ts: 1,
                message: ferroclaw_protocol::Message::user(text),
            })
            .unwrap()
        };
        let results = r#"{"type":"message","ts":2,"message":{"role":"user","content":[{"type":"tool_result","tool_call_id":"c","content":[]}]}}"#;
        let sessions = [
            (
                "gw-web-a",
                vec![
                    meta("gw-web-a"),
                    "{\"type\":\"mess".into(),
                    user("plan a \"trip\"\nto Lisbon"),
                ],
            ),
            ("gw-web-b", vec![meta("gw-web-b"), results.into(), user(&"long ".repeat(100))]),
            ("gw-web-c", vec![meta("gw-web-c")]),
            ("other", vec![meta("other"), user("not the gateway's")]),
        ];
        for (id, lines) in sessions {
            let write = ferroclaw_store::SessionWrite {
                session: id.into(),
                seen: None,
                keep: Default::default(),
                lines,
            };
            assert!(store.write_session(&write).await.unwrap());
        }
        let history = History::shared(store);
        let listed = history.conversations(10).await.unwrap();
        let shown: Vec<(&str, &str)> =
            listed.iter().map(|c| (c.summary.id.as_str(), c.summary.title.as_str())).collect();
        assert_eq!(
            shown,
            [
                ("gw-web-c", ""),
                ("gw-web-b", "long ".repeat(16).as_str()),
                ("gw-web-a", "plan a \"trip\"")
            ]
        );
        assert_eq!(listed[2].summary.model, "m1");
        assert_eq!(listed[2].chat, Some(SessionKey::new("web", "a")));
        assert_eq!(
            history.rename("gw-web-a", " Lisbon ").await.unwrap().as_deref(),
            Some("Lisbon")
        );
        assert_eq!(
            history.conversation("gw-web-a").await.unwrap().unwrap().title.as_deref(),
            Some("Lisbon")
        );
        assert_eq!(history.rename("gw-web-a", "").await.unwrap(), None);
        assert_eq!(history.entries("gw-web-a").await.unwrap().map(|e| e.len()), Some(2));
        assert!(history.entries("gw-web-x").await.unwrap().is_none());
    }

    #[test]
    fn a_snippet_is_the_text_around_what_was_found() {
        let text = format!("{}Lisbon\nin May{}", "a ".repeat(30), " b".repeat(30));
        let found = snippet(&text, "lisbon").unwrap();
        assert!(found.starts_with('…') && found.ends_with('…'), "{found}");
        assert!(found.contains("a Lisbon in May b"), "{found}");
        assert_eq!(snippet("short", "SHORT").as_deref(), Some("short"));
        assert_eq!(snippet("short", "long"), None);
    }

    #[test]
    fn a_damaged_line_is_skipped_and_the_rest_is_read() {
        let lines = [
            r#"{"type":"message","ts":1,"message":{"role":"user","content":[{"type":"text","text":"hi"}]}}"#,
            "{\"type\":\"mess",
            r#"{"type":"from_the_future","x":1}"#,
            r#"{"type":"message","ts":2,"message":{"role":"assistant","content":[{"type":"text","text":"hello"}]}}"#,
        ]
        .map(String::from);
        let entries = parse_lines("s", &lines);
        assert_eq!(entries.len(), 2);
    }
}
