//! A provider's consecutive requests share one connection, even when the
//! server ends a streamed body a moment after its last event: the body is
//! read to its end, so the connection goes back to the pool instead of being
//! closed (an agent's every turn would otherwise connect again).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferroclaw_llm::{ChatRequest, ProviderConfig, WireFormat, connect};
use ferroclaw_protocol::{Message, ProviderEvent};
use futures_util::StreamExt;

/// One streamed Anthropic answer saying "hi", without the body's end.
const EVENTS: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

/// Answers every request on `stream` with [`EVENTS`] in one chunk, and ends
/// the body (the last, empty chunk) a little later.
fn serve(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut out = stream;
    loop {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{head}{:x}\r\n{EVENTS}\r\n", EVENTS.len());
        if out.write_all(chunk.as_bytes()).and_then(|()| out.flush()).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
        if out.write_all(b"0\r\n\r\n").is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn consecutive_streamed_answers_reuse_one_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || serve(stream));
        }
    });
    let provider = connect(ProviderConfig::new("raw", WireFormat::Anthropic, url));
    for turn in 0..3 {
        let request = ChatRequest::new("m", vec![Message::user(format!("turn {turn}"))]);
        let events: Vec<_> = provider.stream(request).collect().await;
        assert!(
            events.iter().any(|e| matches!(e, Ok(ProviderEvent::TextDelta(t)) if t == "hi")),
            "{events:?}"
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection for three answers");
}
