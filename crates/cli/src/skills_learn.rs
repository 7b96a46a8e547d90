//! The learning loop's side of `ferroclaw skills`: `review` (list, show with a
//! diff, approve, reject; interactive in a terminal), `history`, `rollback`,
//! `retire`, `list --archived`, `check PATH` (validation and safety scan of a
//! folder installed by hand), `stats` and `upkeep`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use ferroclaw_core::Config;
use ferroclaw_core::learning::store::Draft;
use ferroclaw_core::learning::{LearningConfig, SkillStore, scan, usage};
use ferroclaw_core::skills::{SkillRoot, SkillSet, SkillSource};
use similar::TextDiff;

use crate::exit;
use crate::render::shorten;
use crate::setup::SetupError;
use crate::skills_cmd::SkillsAction;

fn store(config: &Config) -> SkillStore {
    SkillStore::new(&config.home, &config.workspace)
}

fn fail(e: impl std::fmt::Display) -> SetupError {
    SetupError::Other(e.to_string())
}

/// Runs `review`, `history`, `rollback`, `retire`, `stats` or `upkeep`.
pub(crate) fn run(
    action: &SkillsAction,
    config: &Config,
    set: &SkillSet,
) -> Result<i32, SetupError> {
    let store = store(config);
    match action {
        SkillsAction::Review { list, show, approve, reject, force } => {
            if let Some(id) = show {
                print_draft(&store.draft(id).map_err(fail)?);
                return Ok(exit::OK);
            }
            if let Some(id) = approve {
                return approve_one(&store, id, *force);
            }
            if let Some(id) = reject {
                let d = store.reject(id).map_err(fail)?;
                println!("rejected {} ({} {})", d.id, d.action, d.name);
                return Ok(exit::OK);
            }
            if !*list && std::io::stdin().is_terminal() {
                return interactive(&store);
            }
            list_drafts(&store);
            Ok(exit::OK)
        }
        SkillsAction::History { name } => {
            let (scope, versions) = store.history(name).map_err(fail)?;
            println!("{name} ({scope}): {} versions", versions.len());
            for v in versions {
                let origin =
                    if v.origin.is_empty() { String::new() } else { format!(" ({})", v.origin) };
                println!("{:>4}  {}  {}{origin}", v.version, v.ts, v.action);
            }
            Ok(exit::OK)
        }
        SkillsAction::Rollback { name, version } => {
            let restored = store.rollback(name, *version).map_err(fail)?;
            println!(
                "{name}: version {restored} restored (as a new version; see `ferroclaw skills history {name}`)"
            );
            Ok(exit::OK)
        }
        SkillsAction::Retire { name } => {
            store.retire(name, "user").map_err(fail)?;
            println!("{name} archived; `ferroclaw skills rollback {name}` brings it back");
            Ok(exit::OK)
        }
        SkillsAction::Stats => {
            stats(config, set);
            Ok(exit::OK)
        }
        SkillsAction::Upkeep { propose } => {
            let learning = LearningConfig::from_section(config.file.learning.as_ref());
            let list = usage::upkeep(&store, set, &learning, ferroclaw_core::clock::unix_seconds());
            if list.is_empty() {
                println!(
                    "nothing to do: no skill unused for {} days or often failing",
                    learning.unused_days
                );
                return Ok(exit::OK);
            }
            for u in &list {
                println!("{:<8} {:<24} {}", u.action.to_string(), u.name, u.why);
            }
            if *propose {
                let drafts = usage::propose_upkeep(&store, &list).map_err(fail)?;
                println!(
                    "{} drafts filed; review them with `ferroclaw skills review`",
                    drafts.len()
                );
            } else {
                println!(
                    "(dry run: nothing changed; `ferroclaw skills upkeep --propose` files these as drafts)"
                );
            }
            Ok(exit::OK)
        }
        _ => Ok(exit::USAGE),
    }
}

fn approve_one(store: &SkillStore, id: &str, force: bool) -> Result<i32, SetupError> {
    match store.approve(id, force) {
        Ok(d) => {
            println!("approved {} ({} {}); live from the next session", d.id, d.action, d.name);
            Ok(exit::OK)
        }
        Err(e @ ferroclaw_core::learning::LearningError::Blocked(_)) => {
            eprintln!("{e}");
            Ok(exit::FAILED)
        }
        Err(e) => Err(fail(e)),
    }
}

fn list_drafts(store: &SkillStore) {
    let drafts = store.drafts();
    if drafts.is_empty() {
        println!("no drafts");
        return;
    }
    for d in &drafts {
        let flagged = if d.findings().is_empty() { "" } else { "  [scan: blocked]" };
        println!(
            "{}  {:<7} {:<24} {:<8} {}{flagged}",
            d.id,
            d.action.to_string(),
            shorten(&d.name, 24),
            d.scope.to_string(),
            shorten(&d.reason.replace('\n', " "), 60)
        );
    }
}

/// A draft: what, why, the scan's findings and the change as a diff.
fn print_draft(d: &Draft) {
    println!(
        "draft {}: {} {} ({} skill, from {}, {})",
        d.id, d.action, d.name, d.scope, d.origin, d.created
    );
    if !d.reason.is_empty() {
        println!("reason: {}", d.reason);
    }
    if let Some(new) = &d.merged_from {
        println!(
            "note: proposed as a new skill {new:?}, which is too close to {:?}; merged as a patch",
            d.name
        );
    }
    let findings = d.findings();
    if findings.is_empty() {
        println!("scan: clean");
    } else {
        println!("scan: {} findings (approval blocked unless --force):", findings.len());
        for f in &findings {
            println!("  {f}");
        }
    }
    println!();
    let path = format!("{}/SKILL.md", d.name);
    match (&d.before, &d.after) {
        (before, Some(after)) => {
            let before = before.as_deref().unwrap_or("");
            print!(
                "{}",
                TextDiff::from_lines(before, after.as_str())
                    .unified_diff()
                    .context_radius(3)
                    .header(&format!("a/{path}"), &format!("b/{path}"))
            );
        }
        (_, None) => println!("retire: {path} moves to the archive"),
    }
}

fn interactive(store: &SkillStore) -> Result<i32, SetupError> {
    let drafts = store.drafts();
    if drafts.is_empty() {
        println!("no drafts");
        return Ok(exit::OK);
    }
    let stdin = std::io::stdin();
    for d in drafts {
        print_draft(&d);
        print!("\n[a]pprove, [r]eject, [s]kip, [q]uit? ");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        match line.trim() {
            "a" | "approve" => {
                approve_one(store, &d.id, false)?;
            }
            "r" | "reject" => {
                store.reject(&d.id).map_err(fail)?;
                println!("rejected");
            }
            "q" | "quit" => break,
            _ => println!("skipped"),
        }
        println!();
    }
    Ok(exit::OK)
}

/// `skills list --archived`.
pub(crate) fn list_archived(config: &Config) -> Result<i32, SetupError> {
    let archived = store(config).archived();
    if archived.is_empty() {
        println!("no archived skills");
    }
    for (name, description, scope) in archived {
        println!(
            "{:<24} {:<8} {}",
            shorten(&name, 24),
            scope.to_string(),
            shorten(&description.replace('\n', " "), 80)
        );
    }
    Ok(exit::OK)
}

/// `skills check PATH`: the standard's rules and the safety scan on a skill
/// folder (or a folder of skills); exits 1 on any error or finding.
pub(crate) fn check_path(path: &Path) -> Result<i32, SetupError> {
    if !path.is_dir() {
        return Err(fail(format!("{}: not a folder", path.display())));
    }
    let single = path.join("SKILL.md").is_file();
    let (root, dirs) = if single {
        (path.parent().unwrap_or(Path::new(".")).to_path_buf(), vec![path.to_path_buf()])
    } else {
        let mut dirs: Vec<_> = std::fs::read_dir(path)
            .map_err(fail)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").is_file())
            .collect();
        dirs.sort();
        (path.to_path_buf(), dirs)
    };
    let set = SkillSet::from_roots(&[SkillRoot { dir: root, source: SkillSource::User }], false);
    let mut bad = 0;
    for p in set.problems().iter().filter(|p| dirs.iter().any(|d| p.path.starts_with(d))) {
        println!("{p}");
        bad += usize::from(p.fatal);
    }
    for dir in &dirs {
        for (file, f) in scan::scan_folder(dir) {
            println!("blocked: {}: {f}", file.display());
            bad += 1;
        }
    }
    println!("{} skill folders checked, {bad} problems", dirs.len());
    Ok(if bad > 0 { exit::FAILED } else { exit::OK })
}

fn stats(config: &Config, set: &SkillSet) {
    let numbers = usage::stats(&config.home);
    println!("{:<24} {:>6} {:>6} {:>7}  last used", "skill", "loads", "ok", "failed");
    for s in set.skills() {
        let n = numbers.get(&s.name).cloned().unwrap_or_default();
        let last = n.last_used.map_or("never".to_string(), ferroclaw_core::clock::rfc3339);
        println!("{:<24} {:>6} {:>6} {:>7}  {last}", shorten(&s.name, 24), n.loads, n.ok, n.failed);
    }
    let reviews = usage::reviews(&config.home);
    if !reviews.is_empty() {
        let count = reviews.len() as u64;
        let input: u64 = reviews.iter().map(|r| r.input_tokens).sum();
        let output: u64 = reviews.iter().map(|r| r.output_tokens).sum();
        let by = |d: &str| reviews.iter().filter(|r| r.decision == d).count();
        println!(
            "\n{count} reviews ({} skip, {} create, {} patch, {} error); {} input + {} output tokens per review on average",
            by("skip"),
            by("create"),
            by("patch"),
            by("error"),
            input / count,
            output / count
        );
    }
    let drafts = store(config).drafts().len();
    if drafts > 0 {
        println!("{drafts} drafts wait for `ferroclaw skills review`");
    }
}
