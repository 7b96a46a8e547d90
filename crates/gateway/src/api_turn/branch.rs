//! Where the conversation an API client sent parts from its session's.
//!
//! A chat front-end keeps the conversation and sends it whole with every
//! request; with `user` the server keeps it too. The two copies agree until
//! the client goes back: it regenerates an answer (sends the conversation up
//! to that question again) or edits an earlier message (sends it changed,
//! and nothing after it). [`plan`] says how to bring the session to the
//! client's copy before the turn: the exchanges (a question and the answer
//! to it) both copies hold stay as the session has them, with the tool calls
//! and results the client never saw; from the first one they do not share,
//! the session's own messages leave the conversation and the client's come
//! in their place (`Agent::branch` records it, so the session opened again
//! follows the branch too). Nothing of the branch left behind reaches the
//! model again.
//!
//! A session compacted on the server begins with its summary; the client's
//! copy, which still has the messages the summary stands for, is then
//! matched from the first exchange the session kept after it.

use ferroclaw_core::compaction::is_compacted_history;
use ferroclaw_protocol::{ContentBlock, Message, Role};

/// The text in place of a picture of an earlier message: the client's
/// earlier pictures are not fetched again, and the session has its own.
pub const PICTURE_NOTE: &str = "[a picture the client sent]";

/// One question and what answered it, as compared.
#[derive(Debug)]
struct Exchange {
    /// The question's text (`None`: messages before any question).
    question: Option<String>,
    /// The texts of the answer's assistant messages, in order.
    answer: Vec<String>,
    /// Where it is: its first message, and the one after its last.
    start: usize,
    end: usize,
}

/// How to bring `stored` (the session's conversation) to `sent` (the
/// client's, before its last message): keep the first `keep` stored
/// messages, then add these; `None` when the two agree already.
pub fn plan(stored: &[Message], sent: &[Message]) -> Option<(usize, Vec<Message>)> {
    let summary = usize::from(stored.first().is_some_and(is_compacted_history));
    let ours = exchanges(stored, summary, |m| is_question(m).then(|| first_text(m)));
    let theirs = exchanges(sent, 0, |m| (m.role == Role::User).then(|| client_text(m)));
    let (keep, from) = match agreement(&ours, &theirs, summary == 1) {
        Some((offset, 0)) => (summary, offset),
        Some((offset, shared)) => (ours[shared - 1].end, offset + shared),
        None => (0, 0),
    };
    let then: Vec<Message> = theirs.get(from).map(|e| sent[e.start..].to_vec()).unwrap_or_default();
    (keep < stored.len() || !then.is_empty()).then_some((keep, then))
}

/// Where the client's exchanges take up the session's, and for how many:
/// at their start, or (after a summary) at the best place the session's
/// first exchange is found. `None`: nowhere.
fn agreement(ours: &[Exchange], theirs: &[Exchange], summary: bool) -> Option<(usize, usize)> {
    let run = |offset: usize| {
        let shared = ours.iter().zip(&theirs[offset..]).take_while(|(o, t)| same(o, t)).count();
        (offset, shared)
    };
    if !summary {
        return Some(run(0));
    }
    (0..theirs.len()).map(run).filter(|(_, shared)| *shared > 0).max_by_key(|(_, shared)| *shared)
}

/// True when a session's exchange is the one the client shows: the same
/// question, answered with the same words (the client joins a streamed
/// answer's deltas, a preamble before tool calls included; a client not
/// streaming has the last message's words). Spacing does not count: a
/// front-end that trims or re-wraps what it keeps still agrees.
fn same(ours: &Exchange, theirs: &Exchange) -> bool {
    let question = |e: &Exchange| e.question.as_deref().map(words);
    if question(ours) != question(theirs) {
        return false;
    }
    let shown = words(&theirs.answer.concat());
    let last = ours.answer.last().map_or("", String::as_str);
    shown == words(&ours.answer.concat()) || shown == words(last)
}

/// `text`'s words, one space between each.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `messages[from..]` as exchanges: each question (`question` says which
/// messages are, and their text) with the messages after it.
fn exchanges(
    messages: &[Message],
    from: usize,
    question: impl Fn(&Message) -> Option<String>,
) -> Vec<Exchange> {
    let mut out: Vec<Exchange> = Vec::new();
    for (i, message) in messages.iter().enumerate().skip(from) {
        if let Some(text) = question(message) {
            out.push(Exchange { question: Some(text), answer: Vec::new(), start: i, end: i + 1 });
            continue;
        }
        if out.is_empty() {
            out.push(Exchange { question: None, answer: Vec::new(), start: i, end: i });
        }
        if let Some(last) = out.last_mut() {
            last.end = i + 1;
            let text = message.text();
            if message.role == Role::Assistant && !text.is_empty() {
                last.answer.push(text);
            }
        }
    }
    out
}

/// True for a user message of the session that asks something (not tool
/// results, nor a compaction's summary).
fn is_question(message: &Message) -> bool {
    message.role == Role::User
        && !message.content.iter().any(|b| matches!(b, ContentBlock::ToolResult { .. }))
        && !is_compacted_history(message)
}

/// A session's question as the client wrote it: its first text (what the
/// gateway adds, a plan-mode reminder or a hook's context, comes after).
fn first_text(message: &Message) -> String {
    let first = message.content.iter().find_map(|b| match b {
        ContentBlock::Text { text } => Some(text.as_str()),
        _ => None,
    });
    first.unwrap_or_default().to_string()
}

/// A client's message as the gateway makes a question of it: its text parts, one per line.
fn client_text(message: &Message) -> String {
    let texts: Vec<&str> = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if text != PICTURE_NOTE => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_protocol::ToolCall;

    fn user(text: &str) -> Message {
        Message::user(text)
    }

    fn answer(text: &str) -> Message {
        Message::assistant(text)
    }

    /// A turn that called a tool: question, preamble with the call, result, answer.
    fn with_tool(question: &str, preamble: &str, last: &str) -> Vec<Message> {
        let call = ContentBlock::ToolCall(ToolCall {
            id: "c1".into(),
            name: "read".into(),
            input: serde_json::json!({}),
        });
        vec![
            user(question),
            Message { role: Role::Assistant, content: vec![ContentBlock::text(preamble), call] },
            Message {
                role: Role::User,
                content: vec![ContentBlock::tool_result("c1", "x", false)],
            },
            answer(last),
        ]
    }

    #[test]
    fn a_client_that_agrees_with_the_session_changes_nothing() {
        let mut stored = with_tool("q1", "Looking. ", "It is 4.");
        stored.extend([user("q2"), answer("a2")]);
        // Streamed (the deltas of both messages joined), or not (the last one's words).
        let streamed = [user("q1"), answer("Looking. It is 4."), user("q2"), answer("a2")];
        assert_eq!(plan(&stored, &streamed), None);
        let plain = [user("q1"), answer("It is 4."), user("q2"), answer("a2")];
        assert_eq!(plan(&stored, &plain), None);
        let trimmed = [user(" q1\n"), answer("It  is\n4."), user("q2"), answer("a2 ")];
        assert_eq!(plan(&stored, &trimmed), None);
        assert_eq!(plan(&stored, &[]), Some((0, vec![])), "an empty copy shares nothing");
    }

    #[test]
    fn a_regenerate_drops_the_answer_and_an_edit_the_question_and_all_after() {
        let mut stored = with_tool("q1", "Looking. ", "It is 4.");
        stored.extend([user("q2"), answer("a2"), user("q3"), answer("a3")]);
        // Regenerate a3: the client sends up to a2, then q3 again.
        let regenerate = [user("q1"), answer("It is 4."), user("q2"), answer("a2")];
        assert_eq!(plan(&stored, &regenerate), Some((6, vec![])));
        // Edit q2: the client sends up to the first answer, then its new q2.
        assert_eq!(plan(&stored, &regenerate[..2]), Some((4, vec![])));
        // An edited answer: the client's words from there on.
        let edited = [user("q1"), answer("It is 4."), user("q2"), answer("a better a2")];
        assert_eq!(plan(&stored, &edited), Some((4, edited[2..].to_vec())));
    }

    #[test]
    fn a_compacted_session_is_matched_after_its_summary() {
        let summary = ferroclaw_core::compaction::compacted_history(
            "q1 and q2 were asked",
            std::path::Path::new("t.jsonl"),
            None,
            None,
        );
        let mut stored = summary.clone();
        stored.extend([user("q3"), answer("a3"), user("q4"), answer("a4")]);
        let whole = [user("q1"), answer("a1"), user("q2"), answer("a2"), user("q3"), answer("a3")];
        // Regenerating a4 keeps the summary and q3.
        assert_eq!(plan(&stored, &whole), Some((3, vec![])));
        // A copy that has nothing the session kept replaces it.
        assert_eq!(plan(&stored, &whole[..2]), Some((0, whole[..2].to_vec())));
    }

    #[test]
    fn messages_the_session_never_had_are_added_and_pictures_are_noted_not_compared() {
        let stored = vec![user("q1"), answer("a1")];
        let picture = Message {
            role: Role::User,
            content: vec![ContentBlock::text("look"), ContentBlock::text(PICTURE_NOTE)],
        };
        let sent = [user("q1"), answer("a1"), picture.clone(), answer("a cat")];
        assert_eq!(plan(&stored, &sent), Some((2, sent[2..].to_vec())));
        let mut stored_picture = stored.clone();
        stored_picture.extend([
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::Image { media_type: "image/png".into(), data: "AA".into() },
                    ContentBlock::text("look"),
                ],
            },
            answer("a cat"),
        ]);
        assert_eq!(plan(&stored_picture, &sent), None);
    }
}
