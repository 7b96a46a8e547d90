//! JSON-RPC 2.0 over newline-delimited JSON: one message per line on stdout,
//! requests answered by id, our own requests to the client (permission, file
//! reads) matched to their responses.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// JSON-RPC's own error codes, and ACP's "authentication required".
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP: the agent needs `authenticate` first.
    pub const AUTH_REQUIRED: i64 = -32000;
    /// ACP: a resource (session, file) was not found.
    pub const NOT_FOUND: i64 = -32002;
}

/// An error answer: code and message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into() }
    }

    /// Bad parameters: says which method and why.
    pub fn invalid_params(method: &str, why: impl std::fmt::Display) -> Self {
        RpcError::new(code::INVALID_PARAMS, format!("{method}: invalid params: {why}"))
    }

    /// Something failed on our side.
    pub fn internal(message: impl Into<String>) -> Self {
        RpcError::new(code::INTERNAL_ERROR, message)
    }
}

/// One line read from the client.
#[derive(Debug)]
pub enum Incoming {
    Request { id: Value, method: String, params: Value },
    Notification { method: String, params: Value },
    Response { id: Value, result: Result<Value, RpcError> },
}

/// Parses one line. A line that is no JSON-RPC message is an error to answer
/// with `id: null`.
pub fn parse(line: &str) -> Result<Incoming, RpcError> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| RpcError::new(code::PARSE_ERROR, format!("not JSON: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(RpcError::new(code::INVALID_REQUEST, "a message must be a JSON object"));
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("id"), object.remove("method")) {
        (Some(id), Some(Value::String(method))) => Ok(Incoming::Request { id, method, params }),
        (None, Some(Value::String(method))) => Ok(Incoming::Notification { method, params }),
        (Some(id), None) => {
            let result = match object.remove("error") {
                Some(error) => Err(RpcError::new(
                    error["code"].as_i64().unwrap_or(code::INTERNAL_ERROR),
                    error["message"].as_str().unwrap_or("error without a message"),
                )),
                None => Ok(object.remove("result").unwrap_or(Value::Null)),
            };
            Ok(Incoming::Response { id, result })
        }
        _ => Err(RpcError::new(code::INVALID_REQUEST, "no \"method\" and no \"id\"")),
    }
}

/// Our side of the connection: writes lines (through the writer task) and
/// waits for the answers to our requests. Shared by every session.
pub struct Peer {
    out: mpsc::UnboundedSender<String>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    next_id: AtomicU64,
    closed: std::sync::atomic::AtomicBool,
}

impl Peer {
    /// A peer whose lines go to `out`, one JSON message per line.
    pub fn new(out: mpsc::UnboundedSender<String>) -> Peer {
        Peer {
            out,
            pending: Default::default(),
            next_id: AtomicU64::new(0),
            closed: Default::default(),
        }
    }

    fn send(&self, message: Value) {
        // The writer is gone only when the process ends.
        let _ = self.out.send(message.to_string());
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Answers the client's request `id`.
    pub fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        self.send(match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": e.code, "message": e.message}}),
        });
    }

    /// Sends a request to the client and waits for its answer.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(RpcError::internal("the client went away"));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        rx.await.unwrap_or_else(|_| Err(RpcError::internal("the client went away")))
    }

    /// Hands a response from the client to the request waiting for it; an
    /// answer to nothing we asked is logged and dropped.
    pub fn answer(&self, id: &Value, result: Result<Value, RpcError>) {
        let waiting = id
            .as_u64()
            .and_then(|id| self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id));
        match waiting {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => tracing::warn!("acp: a response to no request of ours (id {id})"),
        }
    }

    /// Fails every request still waiting (the client closed its end).
    /// Later requests fail at once.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_tells_requests_notifications_and_responses_apart() {
        let r = parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).unwrap();
        assert!(matches!(r, Incoming::Request { method, .. } if method == "initialize"));
        let n = parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#).unwrap();
        assert!(matches!(n, Incoming::Notification { .. }));
        let e =
            parse(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#).unwrap();
        assert!(matches!(e, Incoming::Response { result: Err(RpcError { code: -32601, .. }), .. }));
        assert_eq!(parse("nonsense").unwrap_err().code, code::PARSE_ERROR);
        assert_eq!(parse("[1]").unwrap_err().code, code::INVALID_REQUEST);
    }

    #[tokio::test]
    async fn a_request_gets_the_answer_with_its_id() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let peer = std::sync::Arc::new(Peer::new(tx));
        let asking = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request("fs/read_text_file", json!({})).await }
        });
        let sent: Value = serde_json::from_str(&rx.recv().await.unwrap()).unwrap();
        peer.answer(&sent["id"], Ok(json!({"content": "hi"})));
        assert_eq!(asking.await.unwrap().unwrap()["content"], "hi");
    }
}
