//! The loop's side of the turn journal ([`crate::journal`]): a turn named
//! with [`Agent::journal_turn`] records each step as it finishes, and when
//! the journal already holds steps of that turn (its process died), the
//! loop replays them: recorded model answers instead of calling the
//! provider, recorded tool results instead of running the tools again. A
//! tool call whose result was not recorded runs again (at-least-once for
//! tools, exactly-once for the model).

use std::collections::VecDeque;
use std::sync::Arc;

use ferroclaw_protocol::{AgentEvent, ContentBlock, Message, ToolCall};
use tokio_util::sync::CancellationToken;

use super::{Agent, Answer, CallError, EventSink, emit};
use crate::compaction;
use crate::journal::{Step, TurnJournal};
use crate::session::RESUME_TAIL_BYTES;

/// An agent's journal and the turn it is journalling.
pub(super) struct Journalling {
    journal: Arc<dyn TurnJournal>,
    /// The next `run`'s turn id and origin, from [`Agent::journal_turn`].
    next: Option<(String, serde_json::Value)>,
    /// The turn running now.
    current: Option<Current>,
}

struct Current {
    turn: String,
    origin: serde_json::Value,
    /// Recorded steps not yet replayed, oldest first.
    replay: VecDeque<Step>,
    /// The number the next recorded step gets.
    next_step: u32,
    /// True when the turn began in an earlier process.
    resumed: bool,
}

impl Journalling {
    fn new(journal: Arc<dyn TurnJournal>) -> Self {
        Journalling { journal, next: None, current: None }
    }
}

impl Agent {
    /// Journals this agent's turns in `journal` (`None`: off, the default).
    pub fn set_journal(&mut self, journal: Option<Arc<dyn TurnJournal>>) {
        self.journal = journal.map(Journalling::new);
    }

    /// Names the next [`run`](Agent::run) as turn `turn` (an id its caller
    /// derives from the inbound message, so another process computes the
    /// same) with `origin` (what to resume it from, kept in the journal).
    /// When the journal holds steps of that turn, the run replays them.
    pub fn journal_turn(&mut self, turn: String, origin: serde_json::Value) {
        if let Some(journalling) = &mut self.journal {
            journalling.next = Some((turn, origin));
        }
    }

    /// Starts journalling the turn named by `journal_turn`. True when it is
    /// a resumed turn: `input` is then the recorded one, and the session
    /// is cut back to where the turn began, its conversation reloaded.
    pub(super) async fn journal_start(&mut self, input: &mut Message) -> bool {
        let Some(journalling) = &mut self.journal else { return false };
        journalling.current = None;
        let Some((turn, origin)) = journalling.next.take() else { return false };
        let session = self.session.meta().id.clone();
        let record = match journalling.journal.load(&session, &turn).await {
            Ok(record) => record,
            Err(e) => {
                tracing::error!(%session, %turn, "turn not journalled: {e}");
                return false;
            }
        };
        let mut replay: VecDeque<Step> = record.steps.into();
        let begun = match replay.pop_front() {
            Some(Step::Begin { input: recorded, session_len, .. }) => {
                *input = recorded;
                Some(session_len)
            }
            _ => None,
        };
        let resumed = begun.is_some();
        // Step 0 is the begin step, recorded by `journal_begin` for a new turn.
        let next_step = if resumed { 1 + replay.len() as u32 } else { 0 };
        journalling.current = Some(Current { turn, origin, replay, next_step, resumed });
        if let Some(len) = begun {
            tracing::info!(%session, steps = next_step, "resuming an interrupted turn from its journal");
            self.rewind_session_to(len);
        }
        resumed
    }

    /// Records the turn's first step (a resumed turn has it already).
    pub(super) async fn journal_begin(&mut self, input: &Message) {
        let session_len = self.session.len();
        let Some(current) = self.journal.as_ref().and_then(|j| j.current.as_ref()) else {
            return;
        };
        if current.resumed {
            return;
        }
        let step =
            Step::Begin { input: input.clone(), origin: current.origin.clone(), session_len };
        self.journal_record(step).await;
    }

    /// The model's next answer: the recorded one when replaying, else a
    /// model call whose answer is recorded.
    pub(super) async fn next_answer(
        &mut self,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Answer, CallError> {
        if let Some(Step::Model { message, usage, stop, bad_arguments }) =
            self.take_replayed(|step| matches!(step, Step::Model { .. }))
        {
            let request = self.request();
            let estimated_input =
                compaction::estimate_tokens(&request.system, &request.messages, &request.tools);
            let text = message.text();
            if !text.is_empty() {
                emit(events, AgentEvent::TextDelta { text });
            }
            return Ok(Answer { message, usage, stop, bad_arguments, estimated_input });
        }
        let answer = self.call_model(events, cancel).await?;
        if self.journal.as_ref().is_some_and(|j| j.current.is_some()) {
            let step = Step::Model {
                message: answer.message.clone(),
                usage: answer.usage,
                stop: answer.stop.clone(),
                bad_arguments: answer.bad_arguments.clone(),
            };
            self.journal_record(step).await;
        }
        Ok(answer)
    }

    /// Runs the calls, using the recorded result of each call that has one
    /// instead of running it; results come back in call order.
    pub(super) async fn run_tools_journalled(
        &mut self,
        calls: &[ToolCall],
        bad_arguments: &[(String, String)],
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Vec<ContentBlock> {
        let mut recorded = Vec::new();
        for call in calls {
            let id = call.id.as_str();
            let found = self.take_replayed(|step| {
                matches!(step, Step::Tool { result: ContentBlock::ToolResult { tool_call_id, .. } } if tool_call_id == id)
            });
            if let Some(Step::Tool { result }) = found {
                recorded.push(result);
            }
        }
        if recorded.is_empty() {
            return self.run_tools(calls, bad_arguments, events, cancel).await;
        }
        let answered: Vec<bool> = calls
            .iter()
            .map(|call| {
                recorded.iter().any(|r| {
                    matches!(r, ContentBlock::ToolResult { tool_call_id, .. } if *tool_call_id == call.id)
                })
            })
            .collect();
        let left: Vec<ToolCall> =
            calls.iter().zip(&answered).filter(|(_, a)| !**a).map(|(c, _)| c.clone()).collect();
        let mut ran = self.run_tools(&left, bad_arguments, events, cancel).await.into_iter();
        let mut recorded = recorded.into_iter();
        answered.iter().filter_map(|a| if *a { recorded.next() } else { ran.next() }).collect()
    }

    /// Records a tool result as it joins the conversation.
    pub(super) async fn journal_result(&mut self, result: Option<&ContentBlock>) {
        let journalled = self.journal.as_ref().is_some_and(|j| j.current.is_some());
        if let (true, Some(result)) = (journalled, result) {
            self.journal_record(Step::Tool { result: result.clone() }).await;
        }
    }

    /// The next recorded step when `wanted` accepts it. A step that does
    /// not fit (the journal and the conversation disagree) ends the replay:
    /// the rest of the turn runs live.
    fn take_replayed(&mut self, wanted: impl Fn(&Step) -> bool) -> Option<Step> {
        let current = self.journal.as_mut()?.current.as_mut()?;
        let index = current.replay.iter().position(&wanted)?;
        let mismatched = current.replay.iter().take(index).any(|s| !matches!(s, Step::Tool { .. }));
        if mismatched {
            tracing::warn!(turn = %current.turn, "the journal does not match the conversation; the rest of the turn runs live");
            current.replay.clear();
            return None;
        }
        current.replay.remove(index)
    }

    async fn journal_record(&mut self, step: Step) {
        let session = self.session.meta().id.clone();
        let Some(journalling) = &mut self.journal else { return };
        let Some(current) = &mut journalling.current else { return };
        let number = current.next_step;
        current.next_step += 1;
        if let Err(e) = journalling.journal.record(&session, &current.turn, number, &step).await {
            // The journal only speeds up resuming a cut turn; the session's
            // own commit is what must succeed (in PostgreSQL mode a gateway
            // holds the turn's lines while the database is away), so a step
            // not recorded is said, not fatal.
            tracing::error!(%session, turn = %current.turn, "journal step not recorded: {e}");
        }
    }

    /// Cuts the session file back to `len` bytes (where the resumed turn
    /// began) and reloads the conversation from it, so replaying the turn
    /// writes it once. A file on which `len` is not where a line ends is not
    /// the one the turn began in (another machine's copy of a session that
    /// was new then, whose metadata line differs in length): it is left whole.
    fn rewind_session_to(&mut self, len: u64) {
        if self.session.len() > len && !self.session.ends_line_at(len) {
            tracing::warn!(
                "the turn began at byte {len}, inside a line of this copy of the session; not cut back"
            );
        } else if self.session.len() > len
            && let Err(e) = self.session.truncate(len)
        {
            tracing::error!("{e}");
            return;
        }
        match self.session.conversation(RESUME_TAIL_BYTES) {
            Ok(messages) => self.messages = Arc::new(messages),
            Err(e) => tracing::error!("{e}"),
        }
    }
}
