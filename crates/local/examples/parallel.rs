//! Many chats on one model: times one chat alone, then N at once, and
//! prints tokens/s for each chat and all together:
//! `cargo run --release -p ferroclaw-local --example parallel -- MODEL.gguf [N] [TOKENS]`.
//! `bench/local_parallel.sh` runs it.

use std::time::{Duration, Instant};

use ferroclaw_llm::{ChatRequest, Provider};
use ferroclaw_local::{LocalOptions, LocalProvider};
use ferroclaw_protocol::{Message, ProviderEvent};
use futures_util::StreamExt;

/// What one chat did.
struct Run {
    tokens: u64,
    first_token: Duration,
    total: Duration,
}

const TOPICS: [&str; 8] =
    ["a ship", "a dragon", "a city", "a robot", "a river", "a forest", "a king", "a clock"];

async fn chat(provider: &LocalProvider, topic: &str, max_tokens: u32) -> Run {
    let mut request = ChatRequest::new(
        "local",
        vec![Message::user(format!("Write a long story about {topic}."))],
    );
    request.system = "You are a helpful assistant.".into();
    request.max_tokens = max_tokens;
    let started = Instant::now();
    let mut first = None;
    let mut tokens = 0;
    let mut events = provider.stream(request);
    while let Some(event) = events.next().await {
        match event {
            Ok(ProviderEvent::TextDelta(_)) => {
                first.get_or_insert_with(|| started.elapsed());
            }
            Ok(ProviderEvent::Usage(u)) => tokens = u.output_tokens,
            Ok(_) => {}
            Err(e) => eprintln!("error: {e}"),
        }
    }
    let total = started.elapsed();
    Run { tokens, first_token: first.unwrap_or(total), total }
}

fn report(label: &str, runs: &[Run], wall: Duration) {
    for (i, r) in runs.iter().enumerate() {
        let gen_secs = (r.total - r.first_token).as_secs_f64().max(1e-9);
        println!(
            "{label} chat {i}: {} tokens, first after {} ms, {:.1} tok/s",
            r.tokens,
            r.first_token.as_millis(),
            r.tokens.saturating_sub(1) as f64 / gen_secs
        );
    }
    let total: u64 = runs.iter().map(|r| r.tokens).sum();
    println!(
        "{label}: {total} tokens in {:.2} s = {:.1} tok/s all together",
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64()
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: parallel MODEL.gguf [CHATS] [TOKENS]");
        std::process::exit(2);
    };
    let n: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(4);
    let max_tokens: u32 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(128);
    let mut options = LocalOptions::from_env()?;
    options.parallel = options.parallel.max(n as u32);
    // Greedy unless set: every run answers alike.
    if std::env::var_os("FERROCLAW_LOCAL_TEMPERATURE").is_none() {
        options.temperature = 0.0;
    }
    let provider = LocalProvider::open(path.as_ref(), &options)?;
    // Warm up: the system prompt is then cached for every chat.
    chat(&provider, "a cat", 4).await;
    let started = Instant::now();
    let alone = vec![chat(&provider, TOPICS[0], max_tokens).await];
    report("1 alone", &alone, started.elapsed());
    let started = Instant::now();
    let runs = futures_util::future::join_all(
        (0..n).map(|i| chat(&provider, TOPICS[i % TOPICS.len()], max_tokens)),
    )
    .await;
    report(&format!("{n} at once"), &runs, started.elapsed());
    let single = alone[0].tokens as f64 / alone[0].total.as_secs_f64();
    let together: u64 = runs.iter().map(|r| r.tokens).sum();
    println!(
        "speed-up: {:.2}x ({n} chats together vs one alone, tokens/s)",
        together as f64 / started.elapsed().as_secs_f64() / single
    );
    Ok(())
}
