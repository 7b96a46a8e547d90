//! Runs one request against a GGUF model and prints every event with timings:
//! `cargo run --release -p ferroclaw-local --example probe -- MODEL.gguf "prompt" [tools]`.

use std::time::Instant;

use ferroclaw_llm::{ChatRequest, Provider};
use ferroclaw_local::{LocalOptions, LocalProvider};
use ferroclaw_protocol::{Message, ToolSpec};
use futures_util::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(prompt)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: probe MODEL.gguf PROMPT [tools]");
        std::process::exit(2);
    };
    let provider = LocalProvider::open(path.as_ref(), &LocalOptions::from_env()?)?;
    let mut request = ChatRequest::new("local", vec![Message::user(prompt.clone())]);
    request.system = "You are a helpful assistant.".into();
    request.max_tokens = 200;
    if args.get(3).is_some() {
        request.tools = vec![ToolSpec {
            name: "list_files".into(),
            description: "List the files in a folder".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }];
    }
    let started = Instant::now();
    let mut events = provider.stream(request);
    while let Some(event) = events.next().await {
        println!("{:>6} ms {event:?}", started.elapsed().as_millis());
    }
    Ok(())
}
