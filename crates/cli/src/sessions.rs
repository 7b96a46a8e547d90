//! `ferroclaw sessions list|show`.
//!
//! In the gateway's workspace with a shared database configured (`[gateway]
//! store` or `FERROCLAW_DATABASE_URL`), the gateway's conversations are read
//! from the database every gateway writes, never from this box's copies of
//! them, which can lag behind.

use ferroclaw_core::session::{Entry, SessionSummary, for_each_entry};
use ferroclaw_core::{Config, SessionStore};
use ferroclaw_gateway::GatewaySettings;
use ferroclaw_gateway::history::{CONVERSATION_PREFIX, History};
use ferroclaw_protocol::{ContentBlock, ResultPart, Role};

use crate::args::SessionsAction;
use crate::printable::printable;
use crate::render::shorten;
use crate::setup::SetupError;

/// Runs a `sessions` subcommand.
pub(crate) async fn run(action: &SessionsAction, config: &Config) -> Result<(), SetupError> {
    let store = SessionStore::new(&config.home);
    let shared = gateway_history(config).await?;
    match action {
        SessionsAction::List => {
            let mut list = store.list(&config.workspace);
            if let Some(history) = &shared {
                list.retain(|s| !s.id.starts_with(CONVERSATION_PREFIX));
                let stored = history.conversations(usize::MAX).await.map_err(other)?;
                list.extend(stored.into_iter().map(|c| SessionSummary {
                    title: c.title.unwrap_or(c.summary.title.clone()),
                    ..c.summary
                }));
                list.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.id.cmp(&a.id)));
            }
            if list.is_empty() {
                println!("no sessions in {}", config.workspace.display());
            } else {
                println!("{}", header());
            }
            print_list(&list);
        }
        SessionsAction::Show { id } => {
            if let Some(history) = &shared
                && let Some(entries) = stored_entries(history, id).await?
            {
                entries.into_iter().for_each(print_entry);
                return Ok(());
            }
            let path = store.find(&config.workspace, id)?;
            for_each_entry(&path, print_entry)?;
        }
    }
    Ok(())
}

fn other(e: impl std::fmt::Display) -> SetupError {
    SetupError::Other(e.to_string())
}

/// The database's conversations, when a shared database is configured and
/// this is the gateway's workspace (where its conversations are listed).
async fn gateway_history(config: &Config) -> Result<Option<History>, SetupError> {
    // A gateway section that does not parse is the gateway's to report.
    let Ok(settings) = GatewaySettings::parse(config.file.gateway.as_ref()) else {
        return Ok(None);
    };
    let workspace = settings.workspace(&config.home);
    let same = |a: &std::path::Path, b: &std::path::Path| match (a.canonicalize(), b.canonicalize())
    {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if !same(&config.workspace, &workspace) {
        return Ok(None);
    }
    Ok(crate::database::store_of(&settings).await?.map(History::shared))
}

/// The entries of the stored conversation `id` names (its id or a unique
/// start of it); `None` when none is stored.
async fn stored_entries(history: &History, id: &str) -> Result<Option<Vec<Entry>>, SetupError> {
    if let Some(entries) = history.entries(id).await.map_err(other)? {
        return Ok(Some(entries));
    }
    if !id.starts_with(CONVERSATION_PREFIX) {
        return Ok(None);
    }
    let all = history.conversations(usize::MAX).await.map_err(other)?;
    let matches: Vec<&str> =
        all.iter().map(|c| c.summary.id.as_str()).filter(|s| s.starts_with(id)).collect();
    match matches[..] {
        [] => Ok(None),
        [one] => history.entries(one).await.map_err(other),
        _ => Err(SetupError::Other(format!(
            "session id {id:?} is ambiguous: {}; give more of the id",
            matches.join(", ")
        ))),
    }
}

/// Width of the id column: `20261130-043112-1a2b`.
const ID_WIDTH: usize = 20;
/// Width of the created column: `2026-11-30T04:31:12Z`.
const CREATED_WIDTH: usize = 20;

/// The column names above [`print_list`]'s lines, each over its column.
pub(crate) fn header() -> String {
    columns("ID", "CREATED", "SIZE", "MODEL", "FIRST REQUEST")
}

fn columns(id: &str, created: &str, size: &str, model: &str, title: &str) -> String {
    format!("{id:<ID_WIDTH$}  {created:<CREATED_WIDTH$}  {size:>8}  {model:<28}  {title}")
}

/// One line per session: id, created, size, model, first request.
pub(crate) fn print_list(list: &[SessionSummary]) {
    for s in list {
        println!("{}", line(s, 0));
    }
}

/// Most characters of the first request shown.
const TITLE_WIDTH: usize = 80;
/// Fewest shown, however narrow the terminal.
const TITLE_MIN_WIDTH: usize = 12;

/// One session's line; `indent` characters go before it. On a terminal the
/// first request is cut so the line fits its width instead of wrapping.
pub(crate) fn line(s: &SessionSummary, indent: usize) -> String {
    let fixed = columns("", "", "", "", "").chars().count() + indent;
    let title_width = match terminal_columns() {
        // `shorten` adds an ellipsis after the characters it keeps.
        Some(cols) => cols.saturating_sub(fixed + 1).clamp(TITLE_MIN_WIDTH, TITLE_WIDTH),
        None => TITLE_WIDTH,
    };
    columns(
        &s.id,
        &s.created,
        &human_size(s.bytes),
        &shorten(&s.model, 28),
        &shorten(&s.title, title_width),
    )
}

/// The width of the terminal stdout is, when it is one.
fn terminal_columns() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills the `winsize` it is given and nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Page `page` (from 1) of the list, `per_page` lines, with a header and
/// where the next page is.
pub(crate) fn print_page(list: &[SessionSummary], page: usize, per_page: usize) {
    if list.is_empty() {
        println!("no sessions yet");
        return;
    }
    let pages = list.len().div_ceil(per_page);
    let page = page.clamp(1, pages);
    let n = list.len();
    let plural = if n == 1 { "" } else { "s" };
    println!("{n} session{plural}, page {page} of {pages}");
    println!("{}", header());
    print_list(&list[(page - 1) * per_page..(page * per_page).min(list.len())]);
    if page < pages {
        println!("… /sessions {} for the next page; /resume ID to continue one", page + 1);
    }
}

fn print_entry(entry: Entry) {
    match entry {
        Entry::Meta(m) => {
            println!("# session {} · {} · {} · {}\n", m.id, m.created, m.model, m.cwd.display());
        }
        Entry::Message { message, .. } => {
            for block in &message.content {
                match (message.role, block) {
                    (Role::User, ContentBlock::Text { text }) => {
                        println!("› {}\n", printable(text));
                    }
                    (Role::Assistant, ContentBlock::Text { text }) => {
                        println!("{}\n", printable(text));
                    }
                    (_, ContentBlock::Image { media_type, .. }) => {
                        println!("[image {media_type}]\n");
                    }
                    (_, ContentBlock::ToolCall(call)) => {
                        println!(
                            "⏺ {}({})",
                            printable(&call.name),
                            shorten(&call.input.to_string(), 100)
                        );
                    }
                    (_, ContentBlock::ToolResult { content, is_error, .. }) => {
                        let text: String = content.iter().filter_map(ResultPart::as_text).collect();
                        let mark = if *is_error { "error: " } else { "" };
                        println!("  ⎿ {mark}{}\n", shorten(&text, 100));
                    }
                }
            }
        }
        Entry::Error { message, .. } => println!("error: {}\n", printable(&message)),
        Entry::Compaction { replaced, .. } => {
            println!("— {replaced} earlier messages compacted into a summary —\n");
        }
        Entry::Rewind { to, code, conversation, .. } => {
            let what = match (code, conversation) {
                (true, false) => "code",
                (false, true) => "conversation",
                _ => "code and conversation",
            };
            println!("— rewound {what} to checkpoint {to} —\n");
        }
        Entry::Branch { dropped, .. } => {
            println!("— branched: the {dropped} messages before this left the conversation —\n");
        }
        Entry::Usage { .. }
        | Entry::Permission { .. }
        | Entry::Checkpoint { .. }
        | Entry::Changed { .. }
        | Entry::Hook { .. } => {}
    }
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
