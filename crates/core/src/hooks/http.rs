//! `http` hooks: the event's JSON POSTed to a URL; a 2xx answer's body is
//! read as a command hook's stdout would be, anything else is an error that
//! blocks nothing (Claude Code's rules for http hooks).

use std::time::{Duration, Instant};

use super::command::{CommandRun, Ended, MAX_OUTPUT_BYTES};
use super::settings::HttpHook;

/// POSTs `input` to the hook's URL, waiting at most `timeout_secs`.
pub async fn post(hook: &HttpHook, input: &str, timeout_secs: f64) -> CommandRun {
    let started = Instant::now();
    let done = |ended, stdout: String, stderr: String| CommandRun {
        ended,
        stdout: stdout.trim().to_string(),
        stderr,
        duration_ms: started.elapsed().as_millis() as u64,
        over_cap: None,
    };
    // Ignore the error: another crate or an earlier call installed one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client =
        match reqwest::Client::builder().timeout(Duration::from_secs_f64(timeout_secs)).build() {
            Ok(c) => c,
            Err(e) => return done(Ended::NotStarted(e.to_string()), String::new(), String::new()),
        };
    let mut request =
        client.post(&hook.url).header("content-type", "application/json").body(input.to_string());
    for (name, value) in &hook.headers {
        request = request.header(name, value);
    }
    match request.send().await {
        Err(e) if e.is_timeout() => done(Ended::TimedOut, String::new(), String::new()),
        Err(e) => done(Ended::NotStarted(e.to_string()), String::new(), String::new()),
        Ok(response) => {
            let status = response.status();
            let (body, len) = read_body(response).await;
            if len > MAX_OUTPUT_BYTES as u64 {
                let run = done(Ended::Exited(Some(0)), String::new(), String::new());
                return CommandRun { over_cap: Some(("stdout", len)), ..run };
            }
            match status.is_success() {
                true => done(Ended::Exited(Some(0)), body, String::new()),
                false => {
                    done(Ended::Exited(Some(1)), String::new(), format!("HTTP {status}: {body}"))
                }
            }
        }
    }
}

/// The answer's body, its first [`MAX_OUTPUT_BYTES`] kept, and its length.
async fn read_body(mut response: reqwest::Response) -> (String, u64) {
    let mut kept = Vec::new();
    let mut total = 0u64;
    while let Ok(Some(chunk)) = response.chunk().await {
        total += chunk.len() as u64;
        let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    (String::from_utf8_lossy(&kept).into_owned(), total)
}
