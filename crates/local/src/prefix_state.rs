//! The engine's side of [`crate::kvcache`]: finding the fixed prefix of a
//! prompt (system turn, tools, the worked example), loading its saved KV
//! state into a chat's sequence, and saving it after a first read.

use std::path::Path;

use ferroclaw_llm::ChatRequest;
use llama_cpp_2::model::LlamaChatMessage;
use llama_cpp_2::token::LlamaToken;

use crate::engine::Session;
use crate::kvcache::PrefixCache;
use crate::prompt;

impl Session<'_> {
    /// How many of `tokens` are the fixed turns (system prompt, tools, the
    /// worked example): the prefix worth saving. 0 when there is none or it
    /// does not tokenize as a clean prefix of the whole prompt.
    pub(crate) fn fixed_prefix_len(&self, request: &ChatRequest, tokens: &[LlamaToken]) -> usize {
        let fixed = prompt::fixed_turns(request);
        if fixed == 0 {
            return 0;
        }
        let turns = prompt::turns(request);
        let messages: Result<Vec<_>, _> = turns[..fixed.min(turns.len())]
            .iter()
            .map(|t| LlamaChatMessage::new(t.role.to_string(), t.content.replace('\0', "")))
            .collect();
        let (Some(template), Ok(messages)) = (&self.template, messages) else {
            return 0;
        };
        let Ok(text) = self.model.apply_chat_template(template, &messages, false) else {
            return 0;
        };
        let prefix = self.model.vocab().tokenize(text.as_bytes(), true, true);
        // Leave at least one token of the prompt to read.
        if prefix.len() < tokens.len() && tokens.starts_with(&prefix) { prefix.len() } else { 0 }
    }

    /// Loads a saved prefix state into slot `s`'s sequence, checking that it
    /// holds exactly `prefix`. On failure the sequence is left empty.
    pub(crate) fn restore_prefix(
        &mut self,
        s: usize,
        path: &Path,
        prefix: &[LlamaToken],
    ) -> Result<(), String> {
        if !path.is_file() {
            return Err("no file".into());
        }
        // llama.cpp aborts on some malformed files: check before it reads.
        PrefixCache::check(path)?;
        let seq = self.slots[s].seq;
        let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
        self.slots[s].cached.clear();
        let loaded = self.ctx.state_seq_load_file(path, seq, prefix.len());
        match loaded {
            Ok((tokens, bytes)) if tokens == prefix => {
                self.slots[s].cached = tokens;
                PrefixCache::touch(path);
                tracing::debug!(
                    "local: restored {} prompt tokens from {} ({bytes} bytes)",
                    prefix.len(),
                    path.display()
                );
                Ok(())
            }
            other => {
                let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
                Err(match other {
                    Ok(_) => "it holds a different prompt".into(),
                    Err(e) => e.to_string(),
                })
            }
        }
    }

    /// Saves slot `s`'s sequence, which holds exactly the first `prefix`
    /// tokens of the prompt, to `path` (written beside it, then renamed).
    pub(crate) fn save_prefix(&mut self, s: usize, path: &Path, prefix: usize) {
        let tmp = PrefixCache::temp_path(path);
        let slot = &self.slots[s];
        match self.ctx.state_seq_save_file(&tmp, slot.seq, &slot.cached[..prefix]) {
            Ok(bytes) => match std::fs::rename(&tmp, path).and_then(|()| PrefixCache::seal(path)) {
                Ok(()) => {
                    tracing::debug!(
                        "local: saved {prefix} prompt tokens to {} ({bytes} bytes)",
                        path.display()
                    );
                    if let Some(cache) = &self.prefix_cache {
                        cache.evict();
                    }
                }
                Err(e) => tracing::warn!("local: cannot save {}: {e}", path.display()),
            },
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!("local: cannot save the prompt state: {e}");
            }
        }
    }
}
