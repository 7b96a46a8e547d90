//! Picking each token: a repetition penalty, top-k, top-p and temperature
//! (or greedy), and the tool-call grammar. The grammar is checked the way
//! llama.cpp's own `common_sampler` does it: sample without it, check the
//! chosen token against it, and only when the grammar rejects that token
//! apply it to the whole vocabulary and sample again. Most tokens pass, so
//! the costly full-vocabulary grammar pass is rare.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use crate::grammar::regex_escape;
use crate::toolcall::CALL_OPEN;

/// Sampling: top-k and top-p as in llama.cpp's defaults.
const TOP_K: i32 = 40;
const TOP_P: f32 = 0.95;

/// Repetition penalty: tokens seen in the last [`PENALTY_LAST_N`] are made
/// less likely by this factor. 1.1 is llama.cpp's long-standing suggestion
/// for small models; the window stays short so that words a good answer
/// needs again (a file name, `"`) are not pushed away for long.
pub(crate) const REPEAT_PENALTY: f32 = 1.1;
/// Tokens the repetition penalty looks back over.
pub(crate) const PENALTY_LAST_N: i32 = 64;

/// How the tool-call grammar applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrammarMode {
    /// Only once the model opens a call (on the `<tool_call>` token where
    /// the vocabulary has one, else on the text).
    Lazy,
    /// From the first token: the answer must be a call.
    Forced,
}

/// The samplers of one answer.
pub(crate) struct Sampling {
    grammar: Option<LlamaSampler>,
    chain: LlamaSampler,
    /// Tokens the grammar rejected on the fast path (for the log).
    pub resampled: usize,
}

impl Sampling {
    /// Samplers for one answer; `grammar` is the GBNF of the tool calls.
    pub(crate) fn new(
        model: &LlamaModel,
        grammar: Option<(&str, GrammarMode)>,
        temperature: f32,
        seed: u32,
    ) -> Result<Self, String> {
        let grammar = match grammar {
            None => None,
            Some((gbnf, GrammarMode::Forced)) => Some(LlamaSampler::grammar(model, gbnf, "root")),
            Some((gbnf, GrammarMode::Lazy)) => Some(match call_open_token(model) {
                Some(token) => {
                    LlamaSampler::grammar_lazy_patterns(model, gbnf, "root", &[], &[token])
                }
                None => LlamaSampler::grammar_lazy_patterns(
                    model,
                    gbnf,
                    "root",
                    &[regex_escape(CALL_OPEN)],
                    &[],
                ),
            }),
        }
        .transpose()
        .map_err(|e| e.to_string())?;
        let mut chain = vec![LlamaSampler::penalties(
            model.n_vocab(),
            PENALTY_LAST_N,
            REPEAT_PENALTY,
            0.0,
            0.0,
        )];
        if temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            chain.push(LlamaSampler::top_k(TOP_K));
            chain.push(LlamaSampler::top_p(TOP_P, 1));
            chain.push(LlamaSampler::temp(temperature));
            chain.push(LlamaSampler::dist(seed));
        }
        Ok(Self { grammar, chain: LlamaSampler::chain_simple(chain), resampled: 0 })
    }

    /// The next token from the logits at index `at` of the batch just
    /// decoded, accepted by every sampler (so the grammar and the penalty
    /// window move on).
    pub(crate) fn sample(&mut self, ctx: &LlamaContext<'_>, at: i32) -> LlamaToken {
        let mut candidates = ctx.token_data_array_ith(at);
        candidates.apply_sampler(&mut self.chain);
        let mut token = candidates.selected_token().unwrap_or(LlamaToken::new(0));
        if let Some(grammar) = &mut self.grammar {
            let mut single =
                LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
            single.apply_sampler(grammar);
            if single.data.first().is_none_or(|d| d.logit() == f32::NEG_INFINITY) {
                self.resampled += 1;
                let mut candidates = ctx.token_data_array_ith(at);
                candidates.apply_sampler(grammar);
                candidates.apply_sampler(&mut self.chain);
                token = candidates.selected_token().unwrap_or(token);
            }
            grammar.accept(token);
        }
        self.chain.accept(token);
        token
    }
}

/// The token that is exactly `<tool_call>`, when the vocabulary has one
/// (Qwen, Hermes); triggering on it is exact and cheaper than matching text.
fn call_open_token(model: &LlamaModel) -> Option<LlamaToken> {
    match model.vocab().tokenize(CALL_OPEN.as_bytes(), false, true)[..] {
        [token] => Some(token),
        _ => None,
    }
}
