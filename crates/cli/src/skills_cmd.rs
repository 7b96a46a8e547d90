//! `ferroclaw skills list|show|check`: the skills this project sees, one
//! skill in full, and a validation report that fails on errors; the learning
//! loop's subcommands (review, history, rollback, retire, stats, upkeep) are
//! in `skills_learn.rs`.

use std::path::PathBuf;

use clap::Subcommand;
use ferroclaw_core::Config;
use ferroclaw_core::skills::{Skill, SkillSet};

use crate::exit;
use crate::render::shorten;
use crate::setup::SetupError;

/// `ferroclaw skills ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum SkillsAction {
    /// Every skill: name, source, status, description.
    List {
        /// List retired (archived) skills instead.
        #[arg(long)]
        archived: bool,
    },
    /// One skill: where it comes from, its requirements and its instructions.
    Show {
        /// The skill's name.
        name: String,
    },
    /// Validate every skill file; exits 1 when one is malformed. With PATH,
    /// validate and safety-scan that skill folder (one installed by hand).
    Check {
        /// A skill folder (holding SKILL.md) or a folder of skills.
        path: Option<PathBuf>,
    },
    /// Drafts proposed by the learning loop: list them, show one (a diff for
    /// patches), approve or reject. Without flags, asks about each in a terminal.
    Review {
        /// List the pending drafts.
        #[arg(long)]
        list: bool,
        /// Show one draft in full (id or a unique prefix).
        #[arg(long, value_name = "ID")]
        show: Option<String>,
        /// Approve a draft: the skill is live from the next session.
        #[arg(long, value_name = "ID")]
        approve: Option<String>,
        /// Reject a draft (kept under .drafts/rejected/).
        #[arg(long, value_name = "ID")]
        reject: Option<String>,
        /// Approve despite the safety scan's findings.
        #[arg(long, requires = "approve")]
        force: bool,
    },
    /// Every recorded version of a skill.
    History { name: String },
    /// Restore an earlier version (default: the one before the newest) as a new version.
    Rollback { name: String, version: Option<u32> },
    /// Retire a skill: it moves to the archive (see `skills list --archived`).
    Retire { name: String },
    /// How often each skill was loaded and how its tasks ended; what reviews cost.
    Stats,
    /// Skills unused for long or often followed by failure; lists them (a dry
    /// run) unless --propose files drafts for `skills review`.
    Upkeep {
        #[arg(long)]
        propose: bool,
    },
}

/// Runs a `skills` subcommand; returns the exit code.
pub(crate) fn run(action: &SkillsAction, config: &Config) -> Result<i32, SetupError> {
    let set = SkillSet::discover(&config.workspace, &config.home);
    match action {
        SkillsAction::List { archived: true } => crate::skills_learn::list_archived(config),
        SkillsAction::Check { path: Some(path) } => crate::skills_learn::check_path(path),
        SkillsAction::Review { .. }
        | SkillsAction::History { .. }
        | SkillsAction::Rollback { .. }
        | SkillsAction::Retire { .. }
        | SkillsAction::Stats
        | SkillsAction::Upkeep { .. } => crate::skills_learn::run(action, config, &set),
        SkillsAction::List { archived: false } => {
            for problem in set.problems() {
                eprintln!("{problem}");
            }
            if set.skills().is_empty() {
                println!("no skills");
            }
            for s in set.skills() {
                println!(
                    "{:<24} {:<8} {:<12} {}",
                    shorten(&s.name, 24),
                    s.source.to_string(),
                    status(s),
                    shorten(&s.description.replace('\n', " "), 80)
                );
            }
            Ok(exit::OK)
        }
        SkillsAction::Show { name } => {
            let Some(s) = set.get(name) else {
                return Err(SetupError::Other(format!(
                    "no skill {name:?}; skills: {}",
                    set.names().join(", ")
                )));
            };
            print_skill(s);
            Ok(exit::OK)
        }
        SkillsAction::Check { path: None } => {
            for problem in set.problems() {
                println!("{problem}");
            }
            let errors = set.problems().iter().filter(|p| p.fatal).count();
            let warnings = set.problems().len() - errors;
            let unavailable = set.skills().iter().filter(|s| s.unavailable.is_some()).count();
            println!(
                "{} skills ({} unavailable here), {errors} errors, {warnings} warnings",
                set.skills().len(),
                unavailable
            );
            Ok(if errors > 0 { exit::FAILED } else { exit::OK })
        }
    }
}

fn status(s: &Skill) -> &'static str {
    match (&s.unavailable, s.always) {
        (Some(_), _) => "unavailable",
        (None, true) => "always",
        (None, false) => "available",
    }
}

fn print_skill(s: &Skill) {
    println!("name:        {}", s.name);
    println!("description: {}", s.description);
    println!("source:      {} ({})", s.source, s.path.display());
    if let Some(reason) = &s.unavailable {
        println!("unavailable: {reason}");
    }
    if s.always {
        println!("always:      true (in every system prompt)");
    }
    if let Some(w) = &s.when_to_use {
        println!("when to use: {w}");
    }
    if !s.triggers.is_empty() {
        println!("triggers:    {}", s.triggers.join(", "));
    }
    if !s.allowed_tools.is_empty() {
        println!("tools:       {}", s.allowed_tools.join(" "));
    }
    if let Some(l) = &s.license {
        println!("license:     {l}");
    }
    println!();
    println!("{}", ferroclaw_core::skills::render_skill(s));
}
