//! How much an agent costs: time of `Runtime::open` and memory per idle
//! opened agent, against the scripted model (no network, no keys).
//!
//! `bench/runtime_open.sh` runs it with an optimised build:
//! `cargo run --profile fast -p ferroclaw-runtime --example open_bench -- [AGENTS]`.
//! Opens AGENTS (default 10,000) new sessions, keeps them all open, and
//! prints the median and 99th percentile time of one `open` and the growth
//! of the resident set per agent (VmRSS before and after, over AGENTS); then
//! the same per agent for AGENTS/10 agents that each answered one message
//! (measured first, and all kept, so that no agent reuses freed memory).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Counts the heap bytes live, so memory per agent is measured exactly
/// (VmRSS also counts the allocator's slack and freed pages it keeps).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same layout as asked.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as `dealloc` and `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn heap() -> usize {
    LIVE.load(Ordering::Relaxed)
}

use ferroclaw_core::{Config, NoOneToAsk, Overrides};
use ferroclaw_runtime::{Resume, Runtime, SessionOptions};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let agents: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let answered = agents / 10;
    // The server in another process (`bench/runtime_open.sh` starts one), so
    // that the requests it records do not count as the agents' memory.
    let in_process;
    let url = match std::env::var("SCRIPTED_LLM_URL") {
        Ok(url) => url,
        Err(_) => {
            eprintln!(
                "SCRIPTED_LLM_URL is not set: the server runs in this process and its recorded requests count too"
            );
            let script =
                (0..answered).map(|_| ferroclaw_testkit::Turn::text("ok").into()).collect();
            in_process = ferroclaw_testkit::ScriptedServer::start(script);
            in_process.url()
        }
    };
    let home = tempfile::tempdir().expect("temp home");
    let workspace = tempfile::tempdir().expect("temp workspace");
    let config = format!(
        "model = \"scripted/m\"\n\n[providers.scripted]\nwire = \"anthropic\"\nbase_url = \"{url}\"\napi_key = \"k\"\n"
    );
    std::fs::write(home.path().join("config.toml"), config).expect("config");
    let config = Config::load(
        home.path().to_path_buf(),
        workspace.path().to_path_buf(),
        &Overrides::default(),
    )
    .expect("config loads");
    let started = Instant::now();
    let runtime = Runtime::load(config, Default::default()).await.expect("runtime loads");
    let load = started.elapsed();
    let approver: Arc<dyn ferroclaw_core::Approver> = Arc::new(NoOneToAsk);
    let open = || {
        runtime.open(Resume::New, approver.clone(), SessionOptions::default()).expect("opens").agent
    };
    // The first open builds the prompt layers and tools; later ones reuse them.
    let started = Instant::now();
    let first = open();
    let first_open = started.elapsed();
    // Idle after one answered message each, as a gateway chat is.
    let before = rss_kib();
    let heap_before = heap();
    let mut chats = Vec::with_capacity(answered);
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = tokio_util::sync::CancellationToken::new();
    for _ in 0..answered {
        let mut agent = open();
        agent.run(ferroclaw_protocol::Message::user("hi"), &tx, &cancel).await;
        chats.push(agent);
    }
    let after = rss_kib();
    let answered_kib = (after.saturating_sub(before)) as f64 / answered.max(1) as f64;
    let answered_heap = heap().saturating_sub(heap_before) as f64 / answered.max(1) as f64;
    let before = rss_kib();
    let heap_before = heap();
    let mut opened = Vec::with_capacity(agents);
    let mut times = Vec::with_capacity(agents);
    for _ in 0..agents {
        let started = Instant::now();
        let agent = open();
        times.push(started.elapsed());
        opened.push(agent);
    }
    let after = rss_kib();
    let idle_heap = heap().saturating_sub(heap_before) as f64 / agents as f64;
    // What part of an open is the new session file (created, metadata line
    // written, fsynced so the session survives a crash).
    let mut files = Vec::with_capacity(1000);
    let cwd = runtime.config().workspace.clone();
    for _ in 0..1000 {
        let started = Instant::now();
        let log = runtime.sessions().create(&cwd, "scripted/m").expect("session file");
        files.push(started.elapsed());
        drop(log);
    }
    files.sort();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!("runtime load: {:.2} ms", load.as_secs_f64() * 1e3);
    println!("first open (builds the prompt): {:.1} µs", first_open.as_secs_f64() * 1e6);
    println!(
        "open: median {:.1} µs, p99 {:.1} µs over {agents} agents",
        pct(0.5).as_secs_f64() * 1e6,
        pct(0.99).as_secs_f64() * 1e6
    );
    println!(
        "of which the new session file (create + fsync): median {:.1} µs",
        files[files.len() / 2].as_secs_f64() * 1e6
    );
    println!(
        "memory: {:.1} KiB per idle agent (VmRSS {before} KiB -> {after} KiB for {agents} agents), heap {:.1} KiB",
        (after.saturating_sub(before)) as f64 / agents as f64,
        idle_heap / 1024.0
    );
    println!(
        "memory: {answered_kib:.1} KiB per idle agent after one answered message ({answered} agents), heap {:.1} KiB",
        answered_heap / 1024.0
    );
    println!(
        "tools per agent: {}, system prompt: {} bytes (shared)",
        first.tools().len(),
        first.system().len()
    );
    drop(opened);
    drop(chats);
}
