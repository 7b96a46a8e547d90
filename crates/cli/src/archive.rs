//! Archiving a conversation the user leaves with `/new` (nanobot's
//! behaviour): its messages are consolidated into `memory/HISTORY.md` and
//! MEMORY.md in the background while the next conversation starts.

use ferroclaw_core::memory::{MemoryStore, consolidate};
use ferroclaw_core::{Agent, Config};

/// Fewest messages worth archiving (one request and its answer).
const MIN_MESSAGES: usize = 2;

/// Starts consolidating `agent`'s conversation without waiting for it; the
/// outcome is printed when it lands. A conversation left while this runs
/// (e.g. by exiting at once) is not archived, but stays on disk.
pub(crate) fn spawn(agent: &Agent, config: &Config) {
    if agent.messages().len() < MIN_MESSAGES {
        return;
    }
    let store = MemoryStore::new(&config.home).with_limits(config.file.memory);
    let task = consolidate(
        agent.provider().clone(),
        agent.model().to_string(),
        store,
        agent.messages().to_vec(),
    );
    eprintln!("\x1b[2marchiving the conversation to memory in the background\x1b[0m");
    tokio::spawn(async move {
        match task.await {
            Ok(done) if done.memory_updated => {
                eprintln!("\x1b[2m(archived; MEMORY.md updated)\x1b[0m");
            }
            Ok(done) => match done.memory_refused {
                Some(why) => eprintln!("\x1b[2m(archived; memory update refused: {why})\x1b[0m"),
                None => eprintln!("\x1b[2m(archived)\x1b[0m"),
            },
            Err(e) => eprintln!("\x1b[33marchiving failed: {e}\x1b[0m"),
        }
    });
}
