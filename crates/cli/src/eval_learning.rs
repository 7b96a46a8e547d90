//! `ferroclaw eval learning DATASET [--model M]`: the skill-learning loop on
//! labelled fixture conversations. Each case (`NAME.json`) holds the skills
//! in force, a conversation, and the expected decision: `skip`, `create`, or
//! `patch` of a named skill. The whole pipeline runs as in a session: the
//! signals gate (a case it turns away is a skip, with no model call), the
//! review call, the checks, near-duplicate creates turned into patches.
//! Prints one line per case, accuracy per label, a confusion table, and the
//! tokens each review spent.
//!
//! A case also carries `scripted_answer`, the answer a good reviewer gives:
//! the scripted test model replays those (CI checks the plumbing); a real
//! model ignores them.

use std::collections::BTreeMap;
use std::path::Path;

use ferroclaw_core::Config;
use ferroclaw_core::learning::review::{self, Proposal, ReviewInput};
use ferroclaw_core::learning::{LearningConfig, Mode, SegmentEnd, Signals, SkillStore};
use ferroclaw_core::skills::SkillSet;
use ferroclaw_protocol::{ContentBlock, Message, Role, ToolCall};
use serde::Deserialize;
use serde_json::Value;

use crate::exit;
use crate::setup::SetupError;
use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};

const LABELS: [&str; 3] = ["skip", "create", "patch"];

/// One fixture case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// `skip`, `create` or `patch`.
    label: String,
    /// The skill a patch must target.
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    note: String,
    #[serde(default)]
    skills: Vec<CaseSkill>,
    conversation: Vec<Turn>,
    /// What a good reviewer answers (replayed by the scripted model).
    #[serde(default)]
    #[allow(dead_code)]
    scripted_answer: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseSkill {
    name: String,
    description: String,
    body: String,
}

/// `{"user": ...}` or `{"assistant": ..., "tools": [...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    assistant: Option<String>,
    #[serde(default)]
    tools: Vec<CaseTool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseTool {
    name: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    result: String,
    #[serde(default)]
    error: bool,
}

fn messages(turns: &[Turn]) -> Vec<Message> {
    let mut out = Vec::new();
    for (i, t) in turns.iter().enumerate() {
        if let Some(text) = &t.user {
            out.push(Message::user(text.clone()));
        }
        if t.assistant.is_none() && t.tools.is_empty() {
            continue;
        }
        let mut content = Vec::new();
        if let Some(text) = t.assistant.as_ref().filter(|s| !s.is_empty()) {
            content.push(ContentBlock::text(text.clone()));
        }
        for (j, tool) in t.tools.iter().enumerate() {
            content.push(ContentBlock::ToolCall(ToolCall {
                id: format!("t{i}_{j}"),
                name: tool.name.clone(),
                input: tool.input.clone(),
            }));
        }
        out.push(Message { role: Role::Assistant, content });
        if !t.tools.is_empty() {
            let results = t
                .tools
                .iter()
                .enumerate()
                .map(|(j, tool)| {
                    ContentBlock::tool_result(format!("t{i}_{j}"), tool.result.clone(), tool.error)
                })
                .collect();
            out.push(Message { role: Role::User, content: results });
        }
    }
    out
}

fn read_cases(dataset: &Path) -> Result<Vec<(String, Case)>, SetupError> {
    let entries = std::fs::read_dir(dataset)
        .map_err(|e| SetupError::Other(format!("{}: {e}", dataset.display())))?;
    let mut paths: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let text = read_repo_text(&path, MAX_REPO_FILE_BYTES)
            .map_err(|e| SetupError::Other(format!("{}: {e}", path.display())))?;
        let case: Case = serde_json::from_str(&text)
            .map_err(|e| SetupError::Other(format!("{}: {e}", path.display())))?;
        if !LABELS.contains(&case.label.as_str()) {
            return Err(SetupError::Other(format!(
                "{}: label must be skip, create or patch",
                path.display()
            )));
        }
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        out.push((name, case));
    }
    if out.is_empty() {
        return Err(SetupError::Other(format!("{}: no *.json cases", dataset.display())));
    }
    Ok(out)
}

/// Runs the dataset; returns the exit code (0 however accurate the model).
pub(crate) async fn run(
    dataset: &Path,
    model: Option<&str>,
    config: &Config,
) -> Result<i32, SetupError> {
    let cases = read_cases(dataset)?;
    let mut learning = LearningConfig::from_section(config.file.learning.as_ref());
    learning.mode = Mode::Auto;
    let spec = match model.map(str::to_string).or_else(|| learning.model.clone()) {
        Some(m) => m,
        None => config.model_spec()?,
    };
    let runtime =
        ferroclaw_runtime::Runtime::with_hub(config.clone(), ferroclaw_mcp::McpHub::empty())?;
    let (provider, model_name) = runtime.provider(&spec)?;
    println!("eval learning: {spec}, {} cases", cases.len());
    let mut confusion: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut per_label: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let (mut correct, mut reviewed, mut input_tokens, mut output_tokens) = (0, 0u64, 0u64, 0u64);
    for (name, case) in &cases {
        let scratch = tempfile::tempdir().map_err(|e| SetupError::Other(e.to_string()))?;
        let store = SkillStore::new(&scratch.path().join("home"), &scratch.path().join("ws"));
        for s in &case.skills {
            let text = format!(
                "---\nname: {}\ndescription: {}\n---\n{}\n",
                s.name,
                Value::String(s.description.clone()),
                s.body.trim()
            );
            let path =
                store.root(ferroclaw_core::learning::Scope::User).join(&s.name).join("SKILL.md");
            std::fs::create_dir_all(path.parent().unwrap_or(scratch.path()))
                .and_then(|_| std::fs::write(&path, text))
                .map_err(|e| SetupError::Other(format!("{name}: {e}")))?;
        }
        let segment = messages(&case.conversation);
        let signals = Signals::detect(&segment);
        let (got, target, detail) = match signals.worth_review(&learning, SegmentEnd::Answer) {
            None => ("skip".to_string(), None, "turned away by the signals".to_string()),
            Some(_) => {
                reviewed += 1;
                let skills =
                    SkillSet::from_roots(&SkillSet::roots(&store.workspace, &store.home), false);
                let input = ReviewInput::gather(&segment, &skills, &store);
                match review::ask(provider.clone(), &model_name, &input).await {
                    Err(e) => ("error".to_string(), None, e.to_string()),
                    Ok((verdict, used)) => {
                        input_tokens += used.input_tokens + used.cache_read_tokens;
                        output_tokens += used.output_tokens;
                        match review::check(verdict, &store, &skills, &learning) {
                            Err(e) => ("error".to_string(), None, e.to_string()),
                            Ok(p) => {
                                let target = match &p {
                                    Proposal::Patch { target, .. } => Some(target.clone()),
                                    _ => None,
                                };
                                let detail = match &p {
                                    Proposal::Patch { merged_from: Some(n), .. } => {
                                        format!("create {n:?} merged as a patch")
                                    }
                                    Proposal::Create { name, .. } => format!("new skill {name:?}"),
                                    Proposal::Skip { reason, .. } => reason.clone(),
                                    _ => String::new(),
                                };
                                (p.label().to_string(), target, detail)
                            }
                        }
                    }
                }
            }
        };
        let ok = got == case.label && (case.label != "patch" || target == case.target);
        correct += usize::from(ok);
        let tally = per_label.entry(case.label.clone()).or_insert((0, 0));
        tally.0 += usize::from(ok);
        tally.1 += 1;
        *confusion.entry((case.label.clone(), got.clone())).or_default() += 1;
        let shown = |label: &str, t: &Option<String>| match t {
            Some(t) => format!("{label}({t})"),
            None => label.to_string(),
        };
        println!(
            "{} {:<32} expected {:<24} got {:<24} {}",
            if ok { "PASS" } else { "FAIL" },
            name,
            shown(&case.label, &case.target),
            shown(&got, &target),
            crate::render::shorten(&detail, 70)
        );
        if !ok && !case.note.is_empty() {
            println!("     ({})", case.note);
        }
    }
    println!();
    for label in LABELS {
        let (hits, total) = per_label.get(label).copied().unwrap_or((0, 0));
        let share = if total > 0 {
            format!(" ({:.0}%)", 100.0 * hits as f64 / total as f64)
        } else {
            String::new()
        };
        println!("{label:<7} {hits}/{total} right{share}");
    }
    println!("\nconfusion (rows: expected, columns: got)");
    println!("{:<8} {:>6} {:>6} {:>6} {:>6}", "", "skip", "create", "patch", "error");
    for label in LABELS {
        let n =
            |got: &str| confusion.get(&(label.to_string(), got.to_string())).copied().unwrap_or(0);
        println!(
            "{label:<8} {:>6} {:>6} {:>6} {:>6}",
            n("skip"),
            n("create"),
            n("patch"),
            n("error")
        );
    }
    println!(
        "\naccuracy {correct}/{} ({:.0}%); {reviewed} reviews, {} input + {} output tokens per review",
        cases.len(),
        100.0 * correct as f64 / cases.len() as f64,
        input_tokens / reviewed.max(1),
        output_tokens / reviewed.max(1)
    );
    Ok(exit::OK)
}
