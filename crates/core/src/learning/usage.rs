//! What skills are used for: each load and how its task ended
//! (`skills/.usage.jsonl`), each review and what it cost
//! (`skills/.reviews.jsonl`), and the upkeep they suggest: skills unused for
//! long are proposed for retirement, skills repeatedly followed by failure
//! for a patch, always as drafts, after a dry-run listing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::{Draft, DraftAction, SkillStore};
use super::{LearningConfig, LearningError, append_jsonl, read_jsonl};
use crate::clock;
use crate::skills::{SkillSet, SkillSource};

/// How a task that loaded a skill ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UseOutcome {
    /// The model answered.
    Ok,
    /// The request failed (provider error, turn cap, cancelled).
    Failed,
    /// The user corrected the answer next.
    Corrected,
}

/// One line of `.usage.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UseRecord {
    /// Unix seconds.
    pub ts: u64,
    pub skill: String,
    pub session: String,
    pub outcome: UseOutcome,
}

/// One line of `.reviews.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRecord {
    pub ts: u64,
    pub session: String,
    /// Why the segment was reviewed.
    pub why: String,
    /// `skip`, `create`, `patch` or `error`.
    pub decision: String,
    #[serde(default)]
    pub detail: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

fn usage_path(home: &Path) -> PathBuf {
    home.join("skills").join(".usage.jsonl")
}

fn reviews_path(home: &Path) -> PathBuf {
    home.join("skills").join(".reviews.jsonl")
}

/// Records that `skill` was loaded in a task that ended so.
pub fn record_use(home: &Path, skill: &str, session: &str, outcome: UseOutcome) {
    let record = UseRecord {
        ts: clock::unix_seconds(),
        skill: skill.into(),
        session: session.into(),
        outcome,
    };
    if let Ok(value) = serde_json::to_value(&record)
        && let Err(e) = append_jsonl(&usage_path(home), &value)
    {
        tracing::warn!("cannot record a skill use: {e}");
    }
}

/// Records a review.
pub fn record_review(home: &Path, record: &ReviewRecord) {
    if let Ok(value) = serde_json::to_value(record)
        && let Err(e) = append_jsonl(&reviews_path(home), &value)
    {
        tracing::warn!("cannot record a review: {e}");
    }
}

/// Every recorded use.
pub fn uses(home: &Path) -> Vec<UseRecord> {
    read_jsonl(&usage_path(home))
}

/// Every recorded review.
pub fn reviews(home: &Path) -> Vec<ReviewRecord> {
    read_jsonl(&reviews_path(home))
}

/// One skill's numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillStats {
    pub loads: usize,
    pub ok: usize,
    /// Failed or corrected.
    pub failed: usize,
    /// Unix seconds of the last load.
    pub last_used: Option<u64>,
}

/// Numbers per skill name, from the usage records.
pub fn stats(home: &Path) -> BTreeMap<String, SkillStats> {
    let mut out: BTreeMap<String, SkillStats> = BTreeMap::new();
    for r in uses(home) {
        let s = out.entry(r.skill.clone()).or_default();
        s.loads += 1;
        match r.outcome {
            UseOutcome::Ok => s.ok += 1,
            UseOutcome::Failed | UseOutcome::Corrected => s.failed += 1,
        }
        s.last_used = Some(s.last_used.map_or(r.ts, |t| t.max(r.ts)));
    }
    // A load later corrected was counted ok first: count it once, as failed.
    for r in uses(home).iter().filter(|r| r.outcome == UseOutcome::Corrected) {
        if let Some(s) = out.get_mut(&r.skill) {
            s.loads = s.loads.saturating_sub(1);
            s.ok = s.ok.saturating_sub(1);
        }
    }
    out
}

/// A change upkeep suggests.
#[derive(Debug, Clone, PartialEq)]
pub struct Upkeep {
    pub name: String,
    pub action: DraftAction,
    pub why: String,
}

/// What upkeep suggests for the learned skills (project and user ones;
/// built-ins are never touched), given the time `now` in Unix seconds.
pub fn upkeep(
    store: &SkillStore,
    skills: &SkillSet,
    config: &LearningConfig,
    now: u64,
) -> Vec<Upkeep> {
    let numbers = stats(&store.home);
    let pending: Vec<String> = store.drafts().into_iter().map(|d| d.name).collect();
    let mut out = Vec::new();
    for skill in skills.skills().iter().filter(|s| s.source != SkillSource::Builtin) {
        if pending.contains(&skill.name) {
            continue;
        }
        let s = numbers.get(&skill.name).cloned().unwrap_or_default();
        if s.failed >= config.failures_to_flag && s.failed * 2 >= s.loads {
            out.push(Upkeep {
                name: skill.name.clone(),
                action: DraftAction::Patch,
                why: format!("followed by failure in {} of {} uses", s.failed, s.loads),
            });
            continue;
        }
        let since = s.last_used.or_else(|| modified(&skill.path));
        if let Some(t) = since
            && now.saturating_sub(t) > config.unused_days * 86_400
        {
            out.push(Upkeep {
                name: skill.name.clone(),
                action: DraftAction::Retire,
                why: format!(
                    "{} for {} days",
                    if s.last_used.is_some() { "unused" } else { "never used" },
                    now.saturating_sub(t) / 86_400
                ),
            });
        }
    }
    out
}

/// Files the upkeep suggestions as drafts; returns them.
pub fn propose_upkeep(
    store: &SkillStore,
    suggestions: &[Upkeep],
) -> Result<Vec<Draft>, LearningError> {
    let mut out = Vec::new();
    for s in suggestions {
        let Some((scope, text, _)) = store.current_text(&s.name) else { continue };
        let after = match s.action {
            DraftAction::Retire => None,
            _ => Some(warn_in_body(&text, &s.why)),
        };
        out.push(store.save_draft(Draft {
            id: String::new(),
            created: clock::now_rfc3339(),
            action: s.action,
            name: s.name.clone(),
            scope,
            before: Some(text),
            after,
            reason: s.why.clone(),
            origin: "upkeep".into(),
            merged_from: None,
        })?);
    }
    Ok(out)
}

/// The skill with a note at the top of its body saying it has been failing.
fn warn_in_body(text: &str, why: &str) -> String {
    let note = format!(
        "> Upkeep note: this skill was {why}. Check each step before relying on it, and fix what is wrong.\n\n"
    );
    let end = text
        .strip_prefix("---\n")
        .and_then(|rest| rest.find("\n---\n"))
        .map(|at| 4 + at + "\n---\n".len());
    match end {
        Some(at) => format!("{}{note}{}", &text[..at], &text[at..]),
        None => format!("{note}{text}"),
    }
}

fn modified(path: &Path) -> Option<u64> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learning::store::Scope;

    #[test]
    fn failing_and_stale_skills_are_suggested_and_filed_as_drafts_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let store = SkillStore::new(&dir.path().join("home"), &dir.path().join("ws"));
        for name in ["flaky", "fresh"] {
            let text = format!("---\nname: {name}\ndescription: d\n---\nSteps.\n");
            crate::learning::store::write_atomic(
                &store.root(Scope::User).join(name).join("SKILL.md"),
                &text,
            )
            .unwrap();
        }
        for outcome in [UseOutcome::Failed, UseOutcome::Failed, UseOutcome::Ok, UseOutcome::Failed]
        {
            record_use(&store.home, "flaky", "s1", outcome);
        }
        record_use(&store.home, "fresh", "s1", UseOutcome::Ok);
        let skills = SkillSet::discover(&store.workspace, &store.home);
        let config = LearningConfig::default();
        let now = clock::unix_seconds();
        let list = upkeep(&store, &skills, &config, now);
        assert_eq!(list.len(), 1);
        assert_eq!((list[0].name.as_str(), list[0].action), ("flaky", DraftAction::Patch));
        assert!(store.drafts().is_empty(), "the listing is a dry run");
        let later = upkeep(&store, &skills, &config, now + 200 * 86_400);
        assert!(
            later.iter().any(|u| u.name == "fresh" && u.action == DraftAction::Retire),
            "{later:?}"
        );
        let drafts = propose_upkeep(&store, &list).unwrap();
        assert!(
            drafts[0]
                .after
                .as_deref()
                .unwrap()
                .contains("---\n> Upkeep note: this skill was followed by failure in 3 of 4 uses")
        );
        assert_eq!(stats(&store.home)["flaky"].failed, 3);
    }
}
