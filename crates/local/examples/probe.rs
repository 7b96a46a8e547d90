//! Runs one request against a GGUF model and prints every event with timings:
//! `cargo run --release -p ferroclaw-local --example probe -- MODEL.gguf "prompt" [tools]`.

use std::time::Instant;

use ferroclaw_llm::{ChatRequest, Provider};
use ferroclaw_local::{LocalOptions, LocalProvider};
use ferroclaw_protocol::{Message, ProviderEvent, ToolSpec};
use futures_util::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(prompt)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: probe MODEL.gguf PROMPT [tools]");
        std::process::exit(2);
    };
    let provider = LocalProvider::open(path.as_ref(), &LocalOptions::from_env()?)?;
    // PROBE_PAD=N puts N filler words before the prompt, to time long prompts.
    let pad: usize = std::env::var("PROBE_PAD").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let text = format!("{}{prompt}", "filler ".repeat(pad));
    let mut request = ChatRequest::new("local", vec![Message::user(text)]);
    request.system = "You are a helpful assistant.".into();
    request.max_tokens = 200;
    if args.get(3).is_some() {
        request.tools = vec![ToolSpec {
            name: "list_files".into(),
            description: "List the files in a folder".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }].into();
    }
    let quiet = std::env::var_os("PROBE_QUIET").is_some();
    let started = Instant::now();
    let mut first = None;
    let mut events = provider.stream(request);
    while let Some(event) = events.next().await {
        first.get_or_insert_with(|| started.elapsed());
        if let Ok(ProviderEvent::Usage(u)) = &event {
            let total = started.elapsed();
            let ttft = first.unwrap_or(total);
            let gen_secs = (total - ttft).as_secs_f64().max(1e-9);
            println!(
                "prompt {} tokens ({} read, {} reused): first token after {} ms ({:.0} tok/s read); \
                 {} generated at {:.1} tok/s",
                u.input_tokens + u.cache_read_tokens,
                u.input_tokens,
                u.cache_read_tokens,
                ttft.as_millis(),
                u.input_tokens as f64 / ttft.as_secs_f64(),
                u.output_tokens,
                u.output_tokens.saturating_sub(1) as f64 / gen_secs,
            );
        }
        if !quiet {
            println!("{:>6} ms {event:?}", started.elapsed().as_millis());
        }
    }
    Ok(())
}
