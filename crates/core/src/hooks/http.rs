//! `http` hooks: the event's JSON POSTed to a URL; a 2xx answer's body is
//! read as a command hook's stdout would be, anything else is an error that
//! blocks nothing (Claude Code's rules for http hooks).

use std::time::{Duration, Instant};

use super::command::{CommandRun, Ended};
use super::settings::HttpHook;

/// POSTs `input` to the hook's URL, waiting at most `timeout_secs`.
pub async fn post(hook: &HttpHook, input: &str, timeout_secs: f64) -> CommandRun {
    let started = Instant::now();
    let done = |ended, stdout: String, stderr: String| CommandRun {
        ended,
        stdout: stdout.trim().to_string(),
        stderr,
        duration_ms: started.elapsed().as_millis() as u64,
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
            let body = response.text().await.unwrap_or_default();
            match status.is_success() {
                true => done(Ended::Exited(Some(0)), body, String::new()),
                false => {
                    done(Ended::Exited(Some(1)), String::new(), format!("HTTP {status}: {body}"))
                }
            }
        }
    }
}
