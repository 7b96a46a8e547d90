//! Where the agent meets skill learning: when a segment of the conversation
//! ends (a final answer, `/new`, the end of the session), its skill loads
//! are recorded and, when its signals say so, a review is spawned beside the
//! user's turn, never in its way (see [`crate::learning`]).

use std::sync::Arc;

use ferroclaw_llm::Provider;
use ferroclaw_protocol::{Message, Role};

use super::{Agent, Report};
use crate::learning::review::{self, ReviewInput};
use crate::learning::signals::is_correction;
use crate::learning::usage::{self, ReviewRecord, UseOutcome};
use crate::learning::{LearningConfig, SegmentEnd, Signals, SkillStore};
use crate::skills::SkillSet;

/// User requests a segment keeps at most: a confirmation or "remember how
/// to do this" refers to the last few requests, not to the whole session.
pub(super) const MAX_SEGMENT_REQUESTS: usize = 4;

/// The learning state of one conversation.
pub struct Learner {
    pub config: LearningConfig,
    pub store: SkillStore,
    /// The reviewer's model; `None`: the session's own.
    pub reviewer: Option<(Arc<dyn Provider>, String)>,
    /// Messages before this index were reviewed (or came before the session
    /// was opened).
    segment_start: usize,
    /// Skills the last request loaded, so a correction next counts against them.
    last_loaded: Vec<String>,
}

impl Learner {
    /// Learning for a conversation that already holds `existing` messages.
    pub fn new(config: LearningConfig, store: SkillStore, existing: usize) -> Learner {
        Learner { config, store, reviewer: None, segment_start: existing, last_loaded: Vec::new() }
    }

    /// Reviews with this model instead of the session's.
    pub fn with_reviewer(mut self, provider: Arc<dyn Provider>, model: String) -> Learner {
        self.reviewer = Some((provider, model));
        self
    }

    /// The conversation was replaced (compaction, another session).
    pub(super) fn history_replaced(&mut self) {
        self.segment_start = 0;
    }

    pub(super) fn restart_at(&mut self, len: usize) {
        self.segment_start = len;
        self.last_loaded.clear();
    }
}

/// Index of the `n`-th last user request in `messages` (0 when fewer).
fn nth_last_request(messages: &[Message], n: usize) -> usize {
    messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::User && !m.is_tool_results())
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i)
}

impl Agent {
    /// A segment ended: book skill uses and, if it is worth it, spawn its
    /// review.
    pub(super) fn learn(&mut self, end: SegmentEnd, report: Option<&Report>) {
        let Some(learner) = self.remembering.learner.as_mut() else { return };
        let session = self.session.meta().id.clone();
        let home = learner.store.home.clone();
        if let Some(report) = report {
            let request = nth_last_request(&self.messages, 1);
            if learner.segment_start < request && is_correction(&self.messages[request].text()) {
                for skill in learner.last_loaded.drain(..) {
                    usage::record_use(&home, &skill, &session, UseOutcome::Corrected);
                }
            }
            let loaded = Signals::detect(&self.messages[request..]).loaded_skills;
            let outcome = if report.is_error() { UseOutcome::Failed } else { UseOutcome::Ok };
            for skill in &loaded {
                usage::record_use(&home, skill, &session, outcome);
            }
            learner.last_loaded = loaded;
        }
        let floor = nth_last_request(&self.messages, MAX_SEGMENT_REQUESTS);
        let start = learner.segment_start.max(floor).min(self.messages.len());
        let segment = &self.messages[start..];
        if segment.is_empty() {
            return;
        }
        let signals = Signals::detect(segment);
        let why = match report {
            Some(r) if r.is_error() => None,
            _ => signals.worth_review(&learner.config, end),
        };
        let Some(why) = why else {
            if end != SegmentEnd::Answer {
                learner.segment_start = self.messages.len();
            }
            return;
        };
        learner.segment_start = self.messages.len();
        let (provider, model) =
            learner.reviewer.clone().unwrap_or_else(|| (self.provider.clone(), self.model.clone()));
        let (store, config, segment) =
            (learner.store.clone(), learner.config.clone(), segment.to_vec());
        self.remembering.running.retain(|h| !h.is_finished());
        self.remembering.running.push(tokio::spawn(async move {
            let record =
                review_segment(provider, &model, &store, &config, &segment, &session, why).await;
            tracing::info!("skill review: {} {}", record.decision, record.detail);
            usage::record_review(&store.home, &record);
        }));
    }
}

/// Reviews one segment and files the outcome as a draft (approved at once
/// under `auto_approve` when the scan finds nothing).
pub(super) async fn review_segment(
    provider: Arc<dyn Provider>,
    model: &str,
    store: &SkillStore,
    config: &LearningConfig,
    segment: &[Message],
    session: &str,
    why: String,
) -> ReviewRecord {
    let skills = SkillSet::discover(&store.workspace, &store.home);
    let input = ReviewInput::gather(segment, &skills, store);
    let mut record = ReviewRecord {
        ts: crate::clock::unix_seconds(),
        session: session.to_string(),
        why,
        decision: "error".into(),
        detail: String::new(),
        input_tokens: 0,
        output_tokens: 0,
    };
    let (verdict, used) = match review::ask(provider, model, &input).await {
        Ok(found) => found,
        Err(e) => {
            record.detail = e.to_string();
            return record;
        }
    };
    record.input_tokens = used.input_tokens + used.cache_read_tokens + used.cache_write_tokens;
    record.output_tokens = used.output_tokens;
    let proposal = match review::check(verdict, store, &skills, config) {
        Ok(p) => p,
        Err(e) => {
            record.detail = e.to_string();
            return record;
        }
    };
    record.decision = proposal.label().into();
    let Some(draft) = proposal.draft("review") else {
        if let review::Proposal::Skip { reason, .. } = &proposal {
            record.detail = reason.clone();
        }
        return record;
    };
    match store.save_draft(draft) {
        Ok(draft) => {
            record.detail = format!("draft {} ({})", draft.id, draft.name);
            if config.auto_approve {
                match store.approve(&draft.id, false) {
                    Ok(_) => record.detail.push_str(", approved automatically"),
                    Err(e) => record.detail.push_str(&format!(", left for review: {e}")),
                }
            }
        }
        Err(e) => {
            record.decision = "error".into();
            record.detail = e.to_string();
        }
    }
    record
}
