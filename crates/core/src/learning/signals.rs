//! Whether a finished conversation segment is worth a review, from what
//! happened in it, not from counters alone: repeating `read`/`grep` is not
//! experience; a task of many steps that hit errors, was corrected by the
//! user, or was shown to work is.

use std::sync::OnceLock;

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role};
use regex::Regex;

use super::{LearningConfig, Mode};

/// Tools that only look: calls to them alone never make a segment complex.
pub const LOOKING_TOOLS: &[&str] = &[
    "read",
    "grep",
    "glob",
    "list_dir",
    "load_skill",
    "session_search",
    "web_search",
    "web_fetch",
    "todo_write",
    "memory",
];

/// How a segment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentEnd {
    /// The model gave a final answer.
    Answer,
    /// The user started a new conversation (`/new`).
    New,
    /// The session ended.
    SessionEnd,
}

/// What happened in a segment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    /// Tool calls besides looking ones ([`LOOKING_TOOLS`]).
    pub tool_calls: usize,
    /// Model steps that made such calls.
    pub steps: usize,
    /// Failed tool results followed by a later success.
    pub errors_overcome: usize,
    /// The user corrected the agent ("no, do it like this").
    pub correction: bool,
    /// The user asked to remember how it was done.
    pub explicit: bool,
    /// Tests passed, a build succeeded, or the user confirmed.
    pub success: bool,
    /// The last answer asks the user something: the task is not over.
    pub waiting_on_user: bool,
    /// The model saved a skill itself (`skill_manage`): nothing to review.
    pub saved_by_model: bool,
    /// Skills loaded in the segment, in order, repeats removed.
    pub loaded_skills: Vec<String>,
}

fn regex(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

/// "no, do it like this", "that's wrong", "use X instead".
pub fn is_correction(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    regex(
        &CELL,
        r"(?i)^\s*(?:no\b|nope\b|wrong\b|not like that|that'?s not\b|that is not\b|actually,)|\bdo it like this\b|\bthat'?s wrong\b|\byou should have\b|\bnot what i (?:asked|meant|wanted)\b|\binstead\b|\bdon'?t (?:do|use)\b|不对|不是这样",
        )
        .is_some_and(|r| r.is_match(text))
}

/// "remember how to do this", "save this as a skill".
pub fn is_explicit_request(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    regex(
        &CELL,
        r"(?i)\bremember how\b|\b(?:save|keep|make|turn) (?:this|that|it)\b.{0,30}\bskill\b|\bcreate a skill\b|\bremember (?:this|that|the) (?:workflow|procedure|process|recipe|steps)\b|\bnext time,? do it (?:like this|this way)\b|记住怎么|保存为技能|记住这个",
    )
    .is_some_and(|r| r.is_match(text))
}

/// "thanks, that worked", "perfect".
fn is_confirmation(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    regex(
        &CELL,
        r"(?i)\b(?:thanks|thank you|it works|that works|that worked|works now|perfect|great|that did it|lgtm|awesome)\b|谢谢|好了",
    )
    .is_some_and(|r| r.is_match(text))
}

/// Test runners' and builds' success lines.
fn shows_success(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    regex(
        &CELL,
        r"(?i)test result: ok|\b[1-9]\d* passed\b|\ball (?:\d+ )?tests? passed\b|\btests? passed\b|\bbuild succeeded\b|\bdeployed successfully\b",
    )
    .is_some_and(|r| r.is_match(text))
}

fn result_text(content: &[ResultPart]) -> String {
    content.iter().filter_map(ResultPart::as_text).collect()
}

impl Signals {
    /// Reads a segment's messages.
    pub fn detect(segment: &[Message]) -> Signals {
        let mut s = Signals::default();
        let mut requests = 0;
        // Failed results not yet followed by a success.
        let mut failures_pending = 0;
        for m in segment {
            match m.role {
                Role::Assistant => {
                    let mut acted = false;
                    for call in m.tool_calls() {
                        if call.name == "skill_manage" {
                            s.saved_by_model = true;
                        }
                        if call.name == "load_skill"
                            && let Some(name) = call.input["name"].as_str()
                            && !s.loaded_skills.iter().any(|n| n == name)
                        {
                            s.loaded_skills.push(name.to_string());
                        }
                        if !LOOKING_TOOLS.contains(&call.name.as_str())
                            && !call.name.starts_with("code_")
                        {
                            s.tool_calls += 1;
                            acted = true;
                        }
                    }
                    if acted {
                        s.steps += 1;
                    }
                }
                Role::User if m.is_tool_results() => {
                    for block in &m.content {
                        if let ContentBlock::ToolResult { content, is_error, .. } = block {
                            if *is_error {
                                failures_pending += 1;
                            } else {
                                s.errors_overcome += failures_pending;
                                failures_pending = 0;
                                if shows_success(&result_text(content)) {
                                    s.success = true;
                                }
                            }
                        }
                    }
                }
                Role::User => {
                    let text = m.text();
                    if is_explicit_request(&text) {
                        s.explicit = true;
                    }
                    // A segment's first request is the task itself; what
                    // follows reacts to the work.
                    if requests > 0 {
                        if is_correction(&text) {
                            s.correction = true;
                        } else if is_confirmation(&text) {
                            s.success = true;
                        }
                    }
                    requests += 1;
                }
            }
        }
        s.waiting_on_user = segment
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .is_some_and(|m| m.tool_calls().next().is_none() && asks_the_user(&m.text()));
        s
    }

    /// Why the segment deserves a review under `config`, or `None`.
    pub fn worth_review(&self, config: &LearningConfig, end: SegmentEnd) -> Option<String> {
        if config.mode == Mode::Off || self.saved_by_model || self.waiting_on_user {
            return None;
        }
        let _ = end;
        if self.explicit {
            return Some("the user asked to remember how it was done".into());
        }
        if config.mode != Mode::Auto
            || self.tool_calls < config.min_tool_calls
            || self.steps < config.min_steps
        {
            return None;
        }
        let mut evidence = Vec::new();
        if self.errors_overcome > 0 {
            evidence.push(format!("{} errors overcome", self.errors_overcome));
        }
        if self.correction {
            evidence.push("a user correction".into());
        }
        if self.success {
            evidence.push("evidence that it worked".into());
        }
        if evidence.is_empty() {
            return None;
        }
        Some(format!(
            "{} tool calls over {} steps, {}",
            self.tool_calls,
            self.steps,
            evidence.join(", ")
        ))
    }
}

/// True when an answer ends by asking the user something.
fn asks_the_user(text: &str) -> bool {
    let last = text.trim_end();
    last.ends_with('?') || last.ends_with('？')
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_protocol::ToolCall;
    use serde_json::json;

    fn call(name: &str, input: serde_json::Value) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolCall(ToolCall {
                id: "c".into(),
                name: name.into(),
                input,
            })],
        }
    }

    fn result(text: &str, is_error: bool) -> Message {
        Message { role: Role::User, content: vec![ContentBlock::tool_result("c", text, is_error)] }
    }

    fn auto() -> LearningConfig {
        LearningConfig { mode: Mode::Auto, ..LearningConfig::default() }
    }

    fn complex(extra: &[Message]) -> Vec<Message> {
        let mut m = vec![Message::user("set up the release workflow")];
        for i in 0..5 {
            m.push(call("bash", json!({"command": format!("step {i}")})));
            m.push(result("ok", i == 1));
        }
        m.push(result("test result: ok. 12 passed", false));
        m.push(Message::assistant("Done: the workflow runs on tags."));
        m.extend_from_slice(extra);
        m
    }

    #[test]
    fn a_complex_task_with_errors_overcome_and_passing_tests_is_worth_a_review() {
        let s = Signals::detect(&complex(&[]));
        assert_eq!((s.tool_calls, s.steps, s.errors_overcome), (5, 5, 1));
        assert!(s.success);
        let why = s.worth_review(&auto(), SegmentEnd::Answer).unwrap();
        assert!(why.contains("1 errors overcome") && why.contains("worked"), "{why}");
    }

    #[test]
    fn repeating_reads_and_greps_is_not_a_signal() {
        let mut m = vec![Message::user("where is parse defined?")];
        for _ in 0..10 {
            m.push(call("grep", json!({"pattern": "fn parse"})));
            m.push(result("src/a.rs:1", false));
        }
        m.push(Message::assistant("In src/a.rs."));
        let s = Signals::detect(&m);
        assert_eq!(s.tool_calls, 0);
        assert_eq!(s.worth_review(&auto(), SegmentEnd::Answer), None);
    }

    #[test]
    fn many_calls_without_any_evidence_are_not_reviewed() {
        let mut m = vec![Message::user("try things")];
        for _ in 0..6 {
            m.push(call("bash", json!({"command": "x"})));
            m.push(result("done", false));
        }
        m.push(Message::assistant("I ran them."));
        assert_eq!(Signals::detect(&m).worth_review(&auto(), SegmentEnd::Answer), None);
    }

    #[test]
    fn a_segment_waiting_on_the_user_is_never_reviewed_even_when_asked() {
        let mut m = complex(&[]);
        m.push(Message::user("remember how to do this"));
        m.push(Message::assistant("Should it also cover pre-releases?"));
        let s = Signals::detect(&m);
        assert!(s.explicit && s.waiting_on_user);
        assert_eq!(s.worth_review(&auto(), SegmentEnd::SessionEnd), None);
    }

    #[test]
    fn an_explicit_request_is_reviewed_even_in_the_default_mode_and_corrections_count() {
        let mut m = complex(&[Message::user("No, do it like this: tag first.")]);
        m.push(Message::user("and remember how to do this"));
        m.push(Message::assistant("Noted."));
        let s = Signals::detect(&m);
        assert!(s.correction && s.explicit);
        assert!(s.worth_review(&LearningConfig::default(), SegmentEnd::Answer).is_some());
        let mut off = auto();
        off.mode = Mode::Off;
        assert_eq!(s.worth_review(&off, SegmentEnd::Answer), None);
        // The default mode reviews only explicit requests.
        let plain = Signals::detect(&complex(&[]));
        assert_eq!(plain.worth_review(&LearningConfig::default(), SegmentEnd::Answer), None);
    }

    #[test]
    fn a_skill_the_model_saved_itself_is_not_reviewed_again_and_loads_are_listed() {
        let mut m = complex(&[]);
        m.insert(1, call("load_skill", json!({"name": "release"})));
        m.insert(2, result("<skill>", false));
        m.push(call("skill_manage", json!({"action": "create"})));
        let s = Signals::detect(&m);
        assert_eq!(s.loaded_skills, ["release"]);
        assert!(s.saved_by_model);
        assert_eq!(s.worth_review(&auto(), SegmentEnd::Answer), None);
    }
}
