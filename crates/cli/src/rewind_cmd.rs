//! `ferroclaw rewind` and the REPL's `/rewind`: list a session's checkpoints,
//! restore code, conversation or both, undo a rewind.

use clap::Args;
use ferroclaw_core::checkpoint::{self, Checkpoints, Listed, Restore, Rewound, Settings, Target};
use ferroclaw_core::session::{CheckpointKind, RESUME_TAIL_BYTES, SessionLog};
use ferroclaw_core::{Agent, SessionStore};

use crate::args::Cli;
use crate::setup::SetupError;

/// `ferroclaw rewind [N] [--list] [--code|--conversation|--both] [--undo]`.
#[derive(Debug, Args)]
pub(crate) struct RewindArgs {
    /// The checkpoint to rewind to (see --list); without it, the list.
    pub number: Option<usize>,
    /// The session (id or unique prefix); default: this project's latest.
    #[arg(long)]
    pub session: Option<String>,
    /// List the checkpoints: request, time, files changed.
    #[arg(long, conflicts_with_all = ["number", "undo"])]
    pub list: bool,
    /// Restore the files only.
    #[arg(long, conflicts_with_all = ["conversation", "both"])]
    pub code: bool,
    /// Restore the conversation only.
    #[arg(long, conflicts_with = "both")]
    pub conversation: bool,
    /// Restore files and conversation (the default).
    #[arg(long)]
    pub both: bool,
    /// Undo the last rewind.
    #[arg(long, conflicts_with = "number")]
    pub undo: bool,
}

impl RewindArgs {
    fn restore(&self) -> Restore {
        match (self.code, self.conversation) {
            (true, _) => Restore::Code,
            (_, true) => Restore::Conversation,
            _ => Restore::Both,
        }
    }
}

/// Runs `ferroclaw rewind` on the latest (or the named) session.
pub(crate) async fn run(cli: &Cli, args: &RewindArgs) -> Result<i32, SetupError> {
    let config = crate::setup::load_config(cli)?;
    let store = SessionStore::new(&config.home);
    let path = match &args.session {
        Some(id) => store.find(&config.workspace, id)?,
        None => store.latest(&config.workspace).ok_or_else(|| {
            SetupError::Other(format!("no session in {} to rewind", config.workspace.display()))
        })?,
    };
    let mut log = SessionLog::resume(&path, RESUME_TAIL_BYTES)?.log;
    log.adopt_cwd(&config.workspace);
    let workspace = log.meta().cwd.clone();
    let settings = Settings::from_section(config.file.checkpoints.as_ref());
    let failed = |e: checkpoint::CheckpointError| SetupError::Other(e.to_string());
    let mut checkpoints = Checkpoints::new(&config.home, &workspace, &log.meta().id, settings);
    let target = match (args.undo, args.number) {
        (true, _) => Target::Undo,
        (false, Some(n)) if !args.list => Target::Number(n),
        _ => {
            let listed = checkpoint::rewind::list(&checkpoints, &log).await.map_err(failed)?;
            print_list(&listed);
            return Ok(crate::exit::OK);
        }
    };
    let rewound = checkpoint::rewind::rewind(&mut checkpoints, &mut log, target, args.restore())
        .await
        .map_err(failed)?;
    print_rewound(&rewound, "ferroclaw rewind --undo");
    Ok(crate::exit::OK)
}

/// `/rewind [N [code|conversation|both] | undo]` in the REPL.
pub(crate) async fn repl(agent: &mut Agent, arg: &str) -> Result<(), String> {
    let mut words = arg.split_whitespace();
    let target = match words.next() {
        None | Some("list") => {
            print_list(&agent.checkpoints().await.map_err(|e| e.to_string())?);
            return Ok(());
        }
        Some("undo") => Target::Undo,
        Some(n) => Target::Number(n.trim_start_matches('#').parse().map_err(|_| USAGE)?),
    };
    let what = match words.next() {
        None | Some("both") => Restore::Both,
        Some("code") => Restore::Code,
        Some("conversation") => Restore::Conversation,
        Some(_) => return Err(USAGE.into()),
    };
    let rewound = agent.rewind(target, what).await.map_err(|e| e.to_string())?;
    print_rewound(&rewound, "/rewind undo");
    Ok(())
}

const USAGE: &str = "usage: /rewind (list) | /rewind N [code|conversation|both] | /rewind undo";

fn print_list(listed: &[Listed]) {
    if listed.is_empty() {
        println!("no checkpoints yet (one is taken before each request that may change files)");
        return;
    }
    for c in listed {
        let when = ferroclaw_core::clock::rfc3339(c.ts).replace('T', " ").replace('Z', "");
        let what = match c.kind {
            CheckpointKind::Request => format!("› {}", c.label),
            CheckpointKind::Rewind => format!("↺ {}", c.label),
        };
        let files = match (c.kept, c.changed.len()) {
            (false, _) => "files pruned".to_string(),
            (true, 0) => "no files changed".to_string(),
            (true, _) => c.changed.join(", "),
        };
        println!("#{:<3} {when}  {}  ({files})", c.number, crate::render::shorten(&what, 60));
        for note in &c.skipped {
            println!("      not captured: {note}");
        }
    }
}

fn print_rewound(r: &Rewound, undo: &str) {
    let what = match r.restored {
        Restore::Code => "code",
        Restore::Conversation => "conversation",
        Restore::Both => "code and conversation",
    };
    println!("rewound {what} to #{} ({})", r.to.number, r.to.label);
    for f in &r.files {
        println!("  {f}");
    }
    for f in &r.skipped {
        println!("  not restored: {f}");
    }
    println!("undo with `{undo}` (or rewind to #{})", r.undo_number);
}
