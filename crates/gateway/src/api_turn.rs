//! What an OpenAI API request asks of the turn that answers it, carried in
//! the inbound message's metadata (so it travels through the shared
//! database to whichever gateway runs the turn, and into the turn journal):
//! the client's `system` message as a layer of the system prompt, the
//! conversation the request carries (without `user`, a stateless request:
//! its own chat, its messages the whole conversation; with `user`, the
//! copy the session is brought to when the client went back, see
//! [`branch`]), the model an alias named, the sampling options, and the
//! request's `Idempotency-Key`.
//!
//! The chat's worker applies it when it opens the agent ([`ApiTurn::options`])
//! and before each turn ([`ApiTurn::prepare`]).

use ferroclaw_core::Agent;
use ferroclaw_protocol::{ContentBlock, Message, Sampling};
use ferroclaw_runtime::Runtime;
use serde::{Deserialize, Serialize};

use crate::bus::InboundMessage;
use crate::media::{self, ImageLimits};
use crate::sessions::SessionKey;

pub mod branch;

/// The metadata key of an API request's [`ApiTurn`].
pub const METADATA_KEY: &str = "openai";

/// The chat id prefix of stateless requests (`api-~ID`, one chat each); a
/// request with `user` talks in chat `api-USER`.
pub const STATELESS_PREFIX: &str = "api-~";

/// True for the one-off chat of a stateless API request.
pub fn is_stateless_chat(key: &SessionKey) -> bool {
    key.channel == "web" && key.chat_id.starts_with(STATELESS_PREFIX)
}

/// The heading the client's `system` message goes under, at the end of the
/// system prompt: the model tells the client's instructions from its own,
/// and the worker finds the layer an open agent was given.
const LAYER_HEADING: &str = "# Instructions from the API client";

/// What an API request asks of its turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiTurn {
    /// The client's `system` (and `developer`) messages, joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation before the request's last user message, for a
    /// stateless request (`None`: the chat's session holds the history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Vec<Message>>,
    /// `PROVIDER/MODEL` an alias of `[channels.web] models` named (`None`:
    /// the gateway's model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The request's `Idempotency-Key`: its answer is recorded under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// For a request with `user` that carries earlier messages: the
    /// conversation as the client has it, before its last message (texts
    /// only, a picture as [`branch::PICTURE_NOTE`]); the session follows it
    /// where the two part (a regenerate, an edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_history: Option<Vec<Message>>,
    /// `temperature`, `top_p`, `seed`, `stop`.
    #[serde(default, skip_serializing_if = "Sampling::is_default")]
    pub sampling: Sampling,
    /// `max_completion_tokens` (or `max_tokens`): the cap on each answer of
    /// the turn (`None`: the configured `max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

impl ApiTurn {
    /// The API request `message` carries, if it is one.
    pub fn of(message: &InboundMessage) -> Option<ApiTurn> {
        let value = message.metadata.get(METADATA_KEY)?;
        serde_json::from_value(value.clone()).ok()
    }

    /// Puts this on `message`.
    pub fn attach(&self, message: &mut InboundMessage) {
        if let Ok(value) = serde_json::to_value(self) {
            message.metadata.insert(METADATA_KEY.into(), value);
        }
    }

    /// True for a request without `user`: its own conversation.
    pub fn is_stateless(&self) -> bool {
        self.conversation.is_some()
    }

    /// The system prompt layer for the client's `system` message.
    fn layer(&self) -> Option<String> {
        let system = self.system.as_deref().map(str::trim).filter(|s| !s.is_empty())?;
        Some(format!("{LAYER_HEADING}\n\n{system}"))
    }

    /// Gives an open `agent` this request's layer in place of the one it
    /// has (a client that changed its `system` message); none for none.
    fn relayer(&self, agent: &mut Agent) {
        let system = agent.system();
        let base = system.split_once(LAYER_HEADING).map_or(system, |(base, _)| base.trim_end());
        let wanted = match self.layer() {
            Some(layer) => format!("{base}\n\n{layer}"),
            None => base.to_string(),
        };
        if wanted != system {
            agent.set_system_prompt(&wanted);
        }
    }

    /// The session options this request adds: the layer; for a stateless
    /// request its conversation (pictures fitted to `limits`), kept out of
    /// recall and memory.
    pub fn options(&self, limits: ImageLimits) -> (Option<String>, Vec<Message>, bool) {
        let conversation = self
            .conversation
            .iter()
            .flatten()
            .map(|m| Message {
                role: m.role,
                content: m.content.iter().map(|b| fitted(b, limits)).collect(),
            })
            .collect();
        (self.layer(), conversation, self.is_stateless())
    }

    /// Readies an open `agent` for this request's turn: the client's
    /// layer, the model, the sampling options, and the branch of the
    /// conversation the client sent ([`branch::plan`]).
    pub fn prepare(&self, agent: &mut Agent, runtime: &Runtime) -> Result<(), String> {
        self.relayer(agent);
        self.use_model(agent, runtime)?;
        agent.set_sampling(self.sampling.clone(), self.max_tokens);
        if let Some(sent) = self.sent_history.as_deref().filter(|s| !s.is_empty())
            && let Some((keep, then)) = branch::plan(agent.messages(), sent)
        {
            tracing::info!(
                kept = keep,
                dropped = agent.messages().len() - keep,
                added = then.len(),
                "the session follows the conversation the API client sent"
            );
            agent.branch(keep, then);
        }
        Ok(())
    }

    /// Makes `agent` answer with the model this request names (the
    /// gateway's own when it names none).
    fn use_model(&self, agent: &mut Agent, runtime: &Runtime) -> Result<(), String> {
        let spec = match &self.model {
            Some(spec) => spec.clone(),
            None => runtime.config().model_spec().map_err(|e| e.to_string())?,
        };
        if agent.model_spec() == spec {
            return Ok(());
        }
        let (provider, model) =
            runtime.provider(&spec).map_err(|e| format!("model {spec}: {e}"))?;
        agent.set_model(provider, model, spec);
        Ok(())
    }
}

/// `block`, a picture scaled down to `limits` when over them.
fn fitted(block: &ContentBlock, limits: ImageLimits) -> ContentBlock {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD as BASE64;
    let ContentBlock::Image { data, .. } = block else { return block.clone() };
    let Ok(bytes) = BASE64.decode(data) else { return block.clone() };
    match media::fit(&bytes, limits) {
        Ok(Some((bytes, media_type))) => {
            ContentBlock::Image { media_type: media_type.into(), data: BASE64.encode(bytes) }
        }
        _ => block.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_turn_survives_the_trip_through_the_database() {
        let mut message = InboundMessage::new("web", "owner", "api-~1", "hi");
        let turn = ApiTurn {
            system: Some("Answer in French.".into()),
            conversation: Some(vec![Message::user("earlier"), Message::assistant("reply")]),
            model: Some("openai/gpt-x".into()),
            idempotency_key: Some("k1".into()),
            sent_history: None,
            sampling: Sampling {
                temperature: Some(0.3),
                stop: vec!["END".into()],
                ..Default::default()
            },
            max_tokens: Some(64),
        };
        turn.attach(&mut message);
        let stored: InboundMessage =
            serde_json::from_value(serde_json::to_value(&message).unwrap()).unwrap();
        assert_eq!(ApiTurn::of(&stored), Some(turn));
        assert!(ApiTurn::of(&InboundMessage::new("web", "owner", "c", "hi")).is_none());
    }
}
