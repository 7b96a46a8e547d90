//! The review: one model call, off the user's path, that reads a finished
//! segment and the skills in force and answers one JSON decision (skip,
//! create, patch). The answer is parsed strictly and checked before it can
//! become a draft: a create must be a valid SKILL.md; a patch must name a
//! skill and an edit that applies exactly once; a create too close to an
//! existing skill becomes a patch of that skill (near-duplicates are what
//! piled up in Hermes).

use std::collections::BTreeSet;
use std::sync::Arc;

use ferroclaw_llm::{ChatRequest, Provider};
use ferroclaw_protocol::{Message, ProviderEvent, Role, Usage};
use futures_util::StreamExt;
use serde::Deserialize;

use super::store::{Draft, DraftAction, Scope, SkillStore, check_skill_text};
use super::{LearningConfig, LearningError};
use crate::clock;
use crate::compaction::transcript_text;
use crate::skills::{Skill, SkillSet};

/// Longest tool result quoted in a review request, in characters.
const RESULT_CHARS: usize = 400;
/// Longest segment transcript sent, in characters (about 6k tokens); the
/// middle is left out of longer ones.
pub const MAX_SEGMENT_CHARS: usize = 24_000;
/// Existing skills whose whole text goes with the request.
pub const CLOSEST_SKILLS: usize = 3;
/// Longest text of one closest skill sent, in characters (about 1k tokens).
pub const MAX_CLOSEST_CHARS: usize = 4_000;
/// Cap on the review answer, in tokens.
const MAX_ANSWER_TOKENS: u32 = 4_096;

/// The model's answer, as the schema allows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum Verdict {
    Skip {
        reason: String,
        #[serde(default)]
        confidence: Option<f64>,
    },
    Create {
        #[serde(default)]
        scope: Option<Scope>,
        #[serde(default)]
        reason: String,
        skill_md: String,
    },
    Patch {
        target: String,
        #[serde(default)]
        reason: String,
        old_string: String,
        new_string: String,
    },
}

/// A checked decision, ready to become a draft.
#[derive(Debug, Clone, PartialEq)]
pub enum Proposal {
    Skip {
        reason: String,
        confidence: Option<f64>,
    },
    Create {
        name: String,
        scope: Scope,
        text: String,
        reason: String,
    },
    Patch {
        target: String,
        scope: Scope,
        before: String,
        after: String,
        reason: String,
        /// The name a create proposed before it was turned into this patch.
        merged_from: Option<String>,
    },
}

impl Proposal {
    /// `skip`, `create` or `patch`.
    pub fn label(&self) -> &'static str {
        match self {
            Proposal::Skip { .. } => "skip",
            Proposal::Create { .. } => "create",
            Proposal::Patch { .. } => "patch",
        }
    }

    /// The draft for a create or patch (`None` for a skip).
    pub fn draft(&self, origin: &str) -> Option<Draft> {
        let base = |action, name: &str, scope, before, after, reason: &str, merged| Draft {
            id: String::new(),
            created: clock::now_rfc3339(),
            action,
            name: name.to_string(),
            scope,
            before,
            after: Some(after),
            reason: reason.to_string(),
            origin: origin.to_string(),
            merged_from: merged,
        };
        match self {
            Proposal::Skip { .. } => None,
            Proposal::Create { name, scope, text, reason } => {
                Some(base(DraftAction::Create, name, *scope, None, text.clone(), reason, None))
            }
            Proposal::Patch { target, scope, before, after, reason, merged_from } => Some(base(
                DraftAction::Patch,
                target,
                *scope,
                Some(before.clone()),
                after.clone(),
                reason,
                merged_from.clone(),
            )),
        }
    }
}

/// What the reviewer is shown.
pub struct ReviewInput {
    /// The segment, compacted ([`compact_segment`]).
    pub transcript: String,
    /// Layer 1: one line per skill in force, archived ones marked.
    pub index: String,
    /// The closest skills' whole SKILL.md, by name.
    pub closest: Vec<(String, String)>,
}

impl ReviewInput {
    /// Gathers what the reviewer needs for `segment`.
    pub fn gather(segment: &[Message], skills: &SkillSet, store: &SkillStore) -> ReviewInput {
        let mut index = String::new();
        for s in skills.skills() {
            index.push_str(&format!("- {}: {}\n", s.name, one_line(&s.description)));
        }
        for (name, description, _) in store.archived() {
            index.push_str(&format!("- {name} (archived): {}\n", one_line(&description)));
        }
        // Proposals waiting for a person: not to be proposed twice.
        for d in store.drafts() {
            index.push_str(&format!(
                "- {} ({} draft pending approval): {}\n",
                d.name,
                d.action,
                one_line(&d.reason)
            ));
        }
        let about = segment_words(segment);
        let mut scored: Vec<(f64, &Skill)> = skills
            .skills()
            .iter()
            .map(|s| (coverage(&words(&format!("{} {}", s.name, s.description)), &about), s))
            .filter(|(score, _)| *score > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let closest = scored
            .into_iter()
            .take(CLOSEST_SKILLS)
            .filter_map(|(_, s)| store.current_text(&s.name).map(|(_, t, _)| (s.name.clone(), t)))
            .collect();
        ReviewInput { transcript: compact_segment(segment), index, closest }
    }
}

/// The segment as text, tool results shortened, the middle left out past
/// [`MAX_SEGMENT_CHARS`].
pub fn compact_segment(segment: &[Message]) -> String {
    let text = transcript_text(segment, RESULT_CHARS);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= MAX_SEGMENT_CHARS {
        return text;
    }
    let head: String = chars[..MAX_SEGMENT_CHARS / 4].iter().collect();
    let tail: String = chars[chars.len() - MAX_SEGMENT_CHARS * 3 / 4..].iter().collect();
    format!("{head}\n[... {} characters left out ...]\n{tail}", chars.len() - MAX_SEGMENT_CHARS)
}

/// The system prompt: the job and the strict output schema.
pub const REVIEW_SYSTEM: &str = "You review one finished segment of a conversation between a user and an AI agent \
and decide whether it taught a reusable skill. Answer with exactly one JSON object and nothing else, in one of \
these shapes:\n\
{\"decision\": \"skip\", \"reason\": \"...\", \"confidence\": 0.0-1.0}\n\
{\"decision\": \"create\", \"scope\": \"user\" or \"project\", \"reason\": \"...\", \"skill_md\": \"---\\nname: NAME\\ndescription: ...\\n---\\n# Title\\n\\n## When to use\\n...\\n## Steps\\n1. ...\\n## Pitfalls\\n- ...\\n\"}\n\
{\"decision\": \"patch\", \"target\": \"EXISTING-NAME\", \"reason\": \"...\", \"old_string\": \"exact text from the target's SKILL.md\", \"new_string\": \"its replacement\"}\n\
Rules:\n\
- Learn experience, not tool-call sequences: a skill says when to use it, the steps that worked and the pitfalls \
met (errors overcome, the user's corrections). Keep it general: no one-off paths, no secrets, no personal data.\n\
- skip a trivial, one-off or failed segment, or one an existing skill already covers.\n\
- Prefer patch to create: when an existing skill (archived ones included) covers the same task, add the new step \
or pitfall to it. Never create a near-duplicate.\n\
- create: name is lowercase letters, digits and hyphens (at most 64 characters); description (at most 1024 \
characters) says what it does and when to use it. scope is project when the knowledge only applies to this \
project, else user.\n\
- patch: old_string appears exactly once in the target's SKILL.md as shown below; new_string replaces it.\n\
- Never write instructions to ignore the user, to send data elsewhere, or to pipe downloads into a shell.";

/// The request for `input`.
pub fn review_request(model: &str, input: &ReviewInput) -> ChatRequest {
    let mut prompt = format!(
        "<skills>\n{}</skills>\n\n",
        if input.index.is_empty() { "(none)\n" } else { &input.index }
    );
    for (name, text) in &input.closest {
        let text = crate::context::cap(text.trim(), MAX_CLOSEST_CHARS);
        prompt.push_str(&format!("<skill_md name=\"{name}\">\n{text}\n</skill_md>\n\n"));
    }
    prompt.push_str(&format!("<segment>\n{}</segment>", input.transcript));
    let mut request = ChatRequest::new(model, vec![Message::user(prompt)]);
    request.system = REVIEW_SYSTEM.into();
    request.max_tokens = MAX_ANSWER_TOKENS;
    request
}

/// Reads the answer: one JSON object, possibly fenced or after some words,
/// matching the schema exactly.
pub fn parse_verdict(answer: &str) -> Result<Verdict, LearningError> {
    let (Some(start), Some(end)) = (answer.find('{'), answer.rfind('}')) else {
        return Err(LearningError::Review(format!(
            "the answer holds no JSON object: {:?}",
            crate::context::cap(answer, 200)
        )));
    };
    if end < start {
        return Err(LearningError::Review("malformed JSON in the answer".into()));
    }
    serde_json::from_str(&answer[start..=end])
        .map_err(|e| LearningError::Review(format!("the answer does not match the schema: {e}")))
}

/// Checks a verdict against the skills in force and turns it into a
/// proposal; a create too close to an existing skill becomes a patch.
pub fn check(
    verdict: Verdict,
    store: &SkillStore,
    skills: &SkillSet,
    config: &LearningConfig,
) -> Result<Proposal, LearningError> {
    match verdict {
        Verdict::Skip { reason, confidence } => Ok(Proposal::Skip { reason, confidence }),
        Verdict::Patch { target, reason, old_string, new_string } => {
            let (scope, before, _) = store.current_text(&target).ok_or_else(|| {
                LearningError::Review(format!("patch of an unknown skill {target:?}"))
            })?;
            if old_string.is_empty() {
                return Err(LearningError::Review("the patch's old_string is empty".into()));
            }
            let count = before.matches(old_string.as_str()).count();
            if count != 1 {
                return Err(LearningError::Review(format!(
                    "the patch's old_string appears {count} times in {target:?} (it must appear once)"
                )));
            }
            let after = before.replacen(&old_string, &new_string, 1);
            check_skill_text(&target, &after)?;
            Ok(Proposal::Patch { target, scope, before, after, reason, merged_from: None })
        }
        Verdict::Create { scope, reason, skill_md } => {
            let doc = crate::frontmatter::parse(&skill_md)
                .map_err(|e| LearningError::Review(format!("the new SKILL.md: {e}")))?;
            let name =
                doc.fields.get("name").and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let description = doc
                .fields
                .get("description")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string();
            check_skill_text(&name, &skill_md)
                .map_err(|e| LearningError::Review(format!("the new SKILL.md: {e}")))?;
            let near = nearest(store, skills, &name, &description)
                .filter(|(score, _)| *score >= config.duplicate_similarity);
            if let Some((_, target)) = near {
                let (scope, before, _) = store
                    .current_text(&target)
                    .ok_or_else(|| LearningError::Review(format!("skill {target:?} vanished")))?;
                let after = merge(&before, &doc.body);
                return Ok(Proposal::Patch {
                    target,
                    scope,
                    before,
                    after,
                    reason,
                    merged_from: Some(name),
                });
            }
            Ok(Proposal::Create {
                name,
                scope: scope.unwrap_or(Scope::User),
                text: skill_md,
                reason,
            })
        }
    }
}

/// The live or archived skill closest to a proposed name and description,
/// with its score.
pub fn nearest(
    store: &SkillStore,
    skills: &SkillSet,
    name: &str,
    description: &str,
) -> Option<(f64, String)> {
    // Built-ins are generic: a new skill near one is still new (patching
    // one stays possible by name).
    let mut candidates: Vec<(String, String)> = skills
        .skills()
        .iter()
        .filter(|s| s.source != crate::skills::SkillSource::Builtin)
        .map(|s| (s.name.clone(), s.description.clone()))
        .collect();
    candidates.extend(store.archived().into_iter().map(|(n, d, _)| (n, d)));
    candidates
        .into_iter()
        .map(|(n, d)| (similarity(name, description, &n, &d), n))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// How alike two skills are, 0..1: 1 for the same name, else the share of
/// the smaller word set (name parts and description) found in the other.
pub fn similarity(name_a: &str, desc_a: &str, name_b: &str, desc_b: &str) -> f64 {
    if name_a == name_b {
        return 1.0;
    }
    let a = words(&format!("{name_a} {desc_a}"));
    let b = words(&format!("{name_b} {desc_b}"));
    let shared = a.intersection(&b).count();
    if shared < 2 {
        return 0.0;
    }
    shared as f64 / a.len().min(b.len()).max(1) as f64
}

/// The share of `skill`'s words found in `about`.
fn coverage(skill: &BTreeSet<String>, about: &BTreeSet<String>) -> f64 {
    if skill.is_empty() {
        return 0.0;
    }
    skill.intersection(about).count() as f64 / skill.len() as f64
}

const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "with", "use", "when", "this", "that", "from", "into", "your", "you",
    "are", "its", "how", "what", "does", "one", "all", "any", "can", "not", "out", "via", "using",
    "used", "uses", "skill", "about", "then", "them", "they", "their", "has", "have", "will",
    "should", "user", "asks", "ask", "wants", "want", "need", "needs", "work", "works",
];

/// Lowercase words of three letters or more, hyphenated names split, stop
/// words and a plural `s` dropped.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(&w.as_str()))
        .map(|w| if w.len() > 4 && w.ends_with('s') { w[..w.len() - 1].to_string() } else { w })
        .collect()
}

/// The words of what the user asked and the tools used.
fn segment_words(segment: &[Message]) -> BTreeSet<String> {
    let mut text = String::new();
    for m in segment {
        if m.role == Role::User && !m.is_tool_results() {
            text.push_str(&m.text());
            text.push(' ');
        }
        for call in m.tool_calls() {
            text.push_str(&call.name);
            text.push(' ');
            text.push_str(&call.input.to_string());
            text.push(' ');
        }
    }
    words(&text)
}

/// An existing skill with a new one's body appended under a dated heading.
fn merge(before: &str, new_body: &str) -> String {
    let today: String = clock::now_rfc3339().chars().take(10).collect();
    format!("{}\n\n## Learned {today}\n\n{}\n", before.trim_end(), new_body.trim())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Asks the model for a verdict on `input`; returns the raw verdict and
/// the tokens the call used.
pub async fn ask(
    provider: Arc<dyn Provider>,
    model: &str,
    input: &ReviewInput,
) -> Result<(Verdict, Usage), LearningError> {
    let mut stream = provider.stream(review_request(model, input));
    let mut answer = String::new();
    let mut usage = Usage::default();
    while let Some(event) = stream.next().await {
        match event {
            Ok(ProviderEvent::TextDelta(t)) => answer.push_str(&t),
            Ok(ProviderEvent::Usage(u)) => usage.merge(&u),
            Ok(_) => {}
            Err(e) => return Err(LearningError::Review(e.to_string())),
        }
    }
    Ok((parse_verdict(&answer)?, usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(skills: &[(&str, &str)]) -> (tempfile::TempDir, SkillStore, SkillSet) {
        let dir = tempfile::tempdir().unwrap();
        let store = SkillStore::new(&dir.path().join("home"), &dir.path().join("ws"));
        for (name, desc) in skills {
            let text = format!("---\nname: {name}\ndescription: {desc}\n---\n1. Do it.\n");
            super::super::store::write_atomic(
                &store.root(Scope::User).join(name).join("SKILL.md"),
                &text,
            )
            .unwrap();
        }
        let set = SkillSet::discover(&store.workspace, &store.home);
        (dir, store, set)
    }

    #[test]
    fn the_schema_is_strict_and_answers_may_be_fenced() {
        let v = parse_verdict(
            "```json\n{\"decision\":\"skip\",\"reason\":\"trivial\",\"confidence\":0.9}\n```",
        )
        .unwrap();
        assert_eq!(v, Verdict::Skip { reason: "trivial".into(), confidence: Some(0.9) });
        assert!(parse_verdict("{\"decision\":\"delete\",\"target\":\"x\"}").is_err());
        assert!(parse_verdict("{\"decision\":\"skip\",\"reason\":\"r\",\"extra\":1}").is_err());
        assert!(parse_verdict("no").is_err());
    }

    #[test]
    fn a_near_duplicate_create_becomes_a_patch_of_the_closest_skill() {
        let (_d, store, set) = store_with(&[(
            "release-crate",
            "Publish a Rust crate release to crates.io with a git tag.",
        )]);
        let verdict = Verdict::Create {
            scope: None,
            reason: "r".into(),
            skill_md: "---\nname: publish-crate\ndescription: Publish a Rust crate to crates.io and tag the release.\n---\n## Pitfalls\n- Run cargo package first.\n".into(),
        };
        let p = check(verdict, &store, &set, &LearningConfig::default()).unwrap();
        let Proposal::Patch { target, after, merged_from, .. } = p else { panic!("{p:?}") };
        assert_eq!(target, "release-crate");
        assert_eq!(merged_from.as_deref(), Some("publish-crate"));
        assert!(
            after.contains("1. Do it.") && after.contains("Run cargo package first."),
            "{after}"
        );
    }

    #[test]
    fn a_distinct_create_stays_a_create_and_a_bad_patch_is_refused() {
        let (_d, store, set) = store_with(&[("release-crate", "Publish a Rust crate release.")]);
        let verdict = Verdict::Create {
            scope: Some(Scope::Project),
            reason: "r".into(),
            skill_md: "---\nname: flaky-ci\ndescription: Diagnose flaky CI jobs by rerunning with logs.\n---\nsteps\n".into(),
        };
        let p = check(verdict, &store, &set, &LearningConfig::default()).unwrap();
        assert!(
            matches!(p, Proposal::Create { ref name, scope: Scope::Project, .. } if name == "flaky-ci"),
            "{p:?}"
        );
        let bad_name = Verdict::Create {
            scope: None,
            reason: String::new(),
            skill_md: "---\nname: Bad Name\ndescription: d\n---\n".into(),
        };
        assert!(check(bad_name, &store, &set, &LearningConfig::default()).is_err());
        let missing = Verdict::Patch {
            target: "release-crate".into(),
            reason: String::new(),
            old_string: "nope".into(),
            new_string: "x".into(),
        };
        let err = check(missing, &store, &set, &LearningConfig::default()).unwrap_err().to_string();
        assert!(err.contains("appears 0 times"), "{err}");
        let good = Verdict::Patch {
            target: "release-crate".into(),
            reason: String::new(),
            old_string: "1. Do it.".into(),
            new_string: "1. Do it.\n2. Tag.".into(),
        };
        let Proposal::Patch { after, .. } =
            check(good, &store, &set, &LearningConfig::default()).unwrap()
        else {
            panic!()
        };
        assert!(after.ends_with("2. Tag.\n"));
    }

    #[test]
    fn similarity_needs_shared_words_and_long_segments_lose_their_middle() {
        assert_eq!(similarity("a", "deploy the app", "b", "summarize a pdf"), 0.0);
        assert!(
            similarity("x", "Deploy the web app to staging", "y", "Deploy web app to production")
                >= 0.5
        );
        let long = vec![Message::user("x".repeat(MAX_SEGMENT_CHARS * 2))];
        let text = compact_segment(&long);
        assert!(text.contains("characters left out") && text.len() < MAX_SEGMENT_CHARS + 200);
    }
}
