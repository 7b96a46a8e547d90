//! `ferroclaw skills list|show|check`: the skills this project sees, one
//! skill in full, and a validation report that fails on errors.

use clap::Subcommand;
use ferroclaw_core::Config;
use ferroclaw_core::skills::{Skill, SkillSet};

use crate::exit;
use crate::render::shorten;
use crate::setup::SetupError;

/// `ferroclaw skills ...`.
#[derive(Debug, Subcommand)]
pub enum SkillsAction {
    /// Every skill: name, source, status, description.
    List,
    /// One skill: where it comes from, its requirements and its instructions.
    Show {
        /// The skill's name.
        name: String,
    },
    /// Validate every skill file; exits 1 when one is malformed.
    Check,
}

/// Runs a `skills` subcommand; returns the exit code.
pub fn run(action: &SkillsAction, config: &Config) -> Result<i32, SetupError> {
    let set = SkillSet::discover(&config.workspace, &config.home);
    match action {
        SkillsAction::List => {
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
        SkillsAction::Check => {
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
