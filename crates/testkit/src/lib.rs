//! A scripted LLM HTTP server for tests and benchmarks, in place of live APIs.
//!
//! [`ScriptedServer`] speaks both wire formats, streaming (SSE) and not, the way the real
//! APIs do: `POST /v1/messages` (Anthropic Messages), `POST /v1/chat/completions` (OpenAI Chat
//! Completions) and `GET /v1/models`. Each model request, on either endpoint, consumes the next
//! [`Step`] of the script: a [`Turn`] (text and tool calls, streamed in several deltas so clients
//! must reassemble them) or a [`Fault`] (HTTP errors, cut or malformed streams, stalls). Every
//! request is recorded with its headers, body, and the moment its response was fully written.
//!
//! The server runs on its own thread with its own runtime, so a test may drive a binary
//! synchronously with `std::process` or call it from `#[tokio::test]`. It is not a general mock:
//! it does not check what clients send beyond requiring a JSON object body, and, with
//! [`ServerOptions::strict`], that every tool call is answered in the next message.
//!
//! ```
//! use std::io::{Read, Write};
//! use ferroclaw_testkit::{ScriptedServer, Turn};
//!
//! let server = ScriptedServer::start(vec![Turn::text("Hello there, friend").into()]);
//! let body = r#"{"model":"m","messages":[]}"#;
//! let mut tcp = std::net::TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
//! write!(tcp, "POST /v1/messages HTTP/1.1\r\nhost: x\r\nconnection: close\r\n").unwrap();
//! write!(tcp, "content-length: {}\r\n\r\n{body}", body.len()).unwrap();
//! let mut response = String::new();
//! tcp.read_to_string(&mut response).unwrap();
//! assert!(response.contains(r#""text":"Hello there, friend""#));
//! assert_eq!(server.requests()[0].body["model"], "m");
//! ```
//!
//! # Script files
//!
//! The `scripted-llm` binary (`scripted-llm --script FILE.json [--port N] [--repeat]
//! [--openai-repeat-id-and-name] [--openai-usage-always] [--strict] [--record FILE.jsonl]`) reads the
//! steps as a JSON array, the serde form of [`Step`]. Turn fields are all optional (usage
//! defaults to 10 in / 5 out); a tool call without `id` gets a generated `toolu_N` / `call_N`.
//!
//! ```json
//! [
//!   {"kind": "reply", "text": "Let me look.",
//!    "tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
//!   {"kind": "fault", "fault": "status", "status": 429, "retry_after": 1},
//!   {"kind": "fault", "fault": "slow_first_byte", "delay_ms": 300, "then": {"text": "Slow."}},
//!   {"kind": "fault", "fault": "cut_mid_stream"},
//!   {"kind": "fault", "fault": "malformed_sse"},
//!   {"kind": "fault", "fault": "stream_error_event"},
//!   {"kind": "fault", "fault": "stall", "after_text": "Thinking"},
//!   {"kind": "reply", "text": "Done.", "input_tokens": 120, "output_tokens": 3}
//! ]
//! ```
//!
//! In a reply's text, `{{last_user}}` ([`LAST_USER`]) stands for the text of the request's
//! last user message: `{"kind": "reply", "text": "echo: {{last_user}}"}` with `--repeat`
//! answers every request with its own words (load tests check answers against requests so).

mod anthropic;
pub mod components;
pub mod git;
pub mod hostile;
pub mod oauth;
mod openai;
pub mod postgres;
mod recording;
mod render;
mod reply;
pub mod scratch;
mod script;
mod server;
mod strict;

pub use postgres::PgCluster;
pub use recording::RecordedRequest;
pub use script::{
    DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, Fault, ScriptedToolCall, Step, Turn,
};
pub use server::{LAST_USER, LAST_USER_TASK_ID, ROUTE_DONE, ScriptedServer, ServerOptions};
pub use strict::request_problem;
