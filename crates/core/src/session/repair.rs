//! Making a loaded conversation one that a strict API accepts, whatever way
//! the process that wrote it ended (Ctrl-C, SIGTERM, kill -9, power loss):
//! every tool call gets a result in the next message (an "interrupted" one
//! when none was written), results without their call are dropped, and user
//! turns in a row are merged into one.

use ferroclaw_protocol::{ContentBlock, Message, Role};

/// The result given to a tool call whose process died before it answered.
pub const INTERRUPTED_RESULT: &str = "[interrupted: ferroclaw stopped before this call returned \
a result; it may have run in part. Check its effect before running it again.]";

/// What [`repair`] changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Repairs {
    /// Tool calls given an "interrupted" result.
    pub interrupted_calls: usize,
    /// Tool results dropped because no call in the message before asked for them.
    pub orphan_results: usize,
    /// User messages merged into the one before.
    pub merged_turns: usize,
}

impl Repairs {
    /// Whether anything was changed.
    pub fn any(&self) -> bool {
        *self != Repairs::default()
    }
}

/// Repairs `messages` in place (see the module docs).
pub fn repair(messages: &mut Vec<Message>) -> Repairs {
    let mut repairs = Repairs::default();
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // Call ids of the last assistant message not yet answered.
    let mut pending: Vec<String> = Vec::new();
    for mut message in messages.drain(..) {
        match message.role {
            Role::User => {
                let before = message.content.len();
                message.content.retain(|block| match block {
                    ContentBlock::ToolResult { tool_call_id, .. } => {
                        pending.iter().any(|id| id == tool_call_id)
                    }
                    _ => true,
                });
                repairs.orphan_results += before - message.content.len();
                let answered: Vec<String> = message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
                        _ => None,
                    })
                    .collect();
                pending.retain(|id| !answered.contains(id));
                let missing = interrupted_results(&mut pending, &mut repairs);
                message.content.splice(0..0, missing);
                if message.content.is_empty() {
                    continue;
                }
                match out.last_mut() {
                    Some(previous) if previous.role == Role::User => {
                        previous.content.append(&mut message.content);
                        repairs.merged_turns += 1;
                    }
                    _ => out.push(message),
                }
            }
            Role::Assistant => {
                close(&mut out, &mut pending, &mut repairs);
                pending = message.tool_calls().map(|c| c.id.clone()).collect();
                out.push(message);
            }
        }
    }
    close(&mut out, &mut pending, &mut repairs);
    *messages = out;
    repairs
}

/// Answers the pending calls with a message of "interrupted" results.
fn close(out: &mut Vec<Message>, pending: &mut Vec<String>, repairs: &mut Repairs) {
    let results = interrupted_results(pending, repairs);
    if !results.is_empty() {
        out.push(Message { role: Role::User, content: results });
    }
}

fn interrupted_results(pending: &mut Vec<String>, repairs: &mut Repairs) -> Vec<ContentBlock> {
    repairs.interrupted_calls += pending.len();
    pending.drain(..).map(|id| ContentBlock::tool_result(id, INTERRUPTED_RESULT, true)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_protocol::ToolCall;

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolCall(ToolCall {
                id: id.into(),
                name: "bash".into(),
                input: serde_json::json!({"command": "sleep 30"}),
            })],
        }
    }

    fn result(id: &str) -> Message {
        Message { role: Role::User, content: vec![ContentBlock::tool_result(id, "ok", false)] }
    }

    #[test]
    fn a_call_left_without_a_result_at_the_end_gets_an_interrupted_one() {
        let mut m = vec![Message::user("run it"), call("c1")];
        let r = repair(&mut m);
        assert_eq!(r.interrupted_calls, 1);
        assert_eq!(m.len(), 3);
        assert_eq!(m[2].content, vec![ContentBlock::tool_result("c1", INTERRUPTED_RESULT, true)]);
    }

    #[test]
    fn a_call_followed_by_a_new_request_gets_its_result_first_in_that_message() {
        let mut m = vec![Message::user("run it"), call("c1"), Message::user("and now?")];
        repair(&mut m);
        assert_eq!(m.len(), 3);
        assert!(
            matches!(&m[2].content[0], ContentBlock::ToolResult { tool_call_id, .. } if tool_call_id == "c1")
        );
        assert_eq!(m[2].text(), "and now?");
    }

    #[test]
    fn user_turns_in_a_row_merge_and_orphan_results_go() {
        let mut m = vec![Message::user("one"), result("ghost"), Message::user("two")];
        let r = repair(&mut m);
        assert_eq!(r, Repairs { interrupted_calls: 0, orphan_results: 1, merged_turns: 1 });
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].content.len(), 2);
    }

    #[test]
    fn a_well_formed_conversation_is_left_alone() {
        let mut m = vec![Message::user("q"), call("c1"), result("c1"), Message::assistant("done")];
        let copy = m.clone();
        assert!(!repair(&mut m).any());
        assert_eq!(m, copy);
    }
}
