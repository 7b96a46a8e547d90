//! `ferroclaw -p`: one request, the answer on stdout, an exit code.

use std::io::{IsTerminal, Read, Write};
use std::sync::Arc;

use ferroclaw_core::{Config, NoOneToAsk, Outcome};
use ferroclaw_protocol::AgentEvent;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio_util::sync::CancellationToken;

use crate::args::{Cli, OutputFormat};
use crate::exit;
use crate::render::{RenderOptions, render};
use crate::setup::{Resume, SetupError, open_agent};

/// Runs one request; returns the process exit code.
pub async fn run(cli: &Cli, config: Config) -> Result<i32, SetupError> {
    let prompt = match cli.prompt.as_deref() {
        Some(p) if p != "-" => p.to_string(),
        _ => {
            let mut buf = String::new();
            if std::io::stdin().is_terminal() {
                return Err(SetupError::Other(
                    "no prompt: pass it as an argument (ferroclaw -p \"...\") or on stdin".into(),
                ));
            }
            std::io::stdin().read_to_string(&mut buf).map_err(|e| {
                SetupError::Other(format!("cannot read the prompt from stdin: {e}"))
            })?;
            buf
        }
    };
    if prompt.trim().is_empty() {
        return Err(SetupError::Other("the prompt is empty".into()));
    }
    let opened = open_agent(&config, &Resume::from_cli(cli), Arc::new(NoOneToAsk))?;
    let mut agent = opened.agent;
    let mcp = crate::mcp_cmd::start_hub(&config, Default::default()).await;
    mcp.register_tools(&mut agent.tools);
    agent.turn_hook = Some(std::sync::Arc::new(crate::mcp_cmd::McpRefresh(mcp.clone())));
    let (tx, rx) = unbounded_channel();
    let status = std::io::stderr().is_terminal();
    let consumer = match cli.output_format {
        OutputFormat::Text => tokio::spawn(render(
            rx,
            agent.model_spec.clone(),
            RenderOptions { answer: false, status },
        )),
        OutputFormat::StreamJson => tokio::spawn(json_lines(rx)),
        OutputFormat::Json => tokio::spawn(drain(rx)),
    };
    let _ = tx.send(AgentEvent::SessionStarted {
        session_id: agent.session.meta().id.clone(),
        model: agent.model_spec.clone(),
        resumed: opened.resumed,
    });
    let cancel = CancellationToken::new();
    crate::interrupt::watch(cancel.clone());
    let report = agent
        .run(ferroclaw_core::mentions::user_message(&prompt, &agent.workspace), &tx, &cancel)
        .await;
    mcp.shutdown().await;
    agent.finish().await;
    drop(tx);
    let _ = consumer.await;
    let mut stdout = std::io::stdout().lock();
    match cli.output_format {
        OutputFormat::Text if report.is_error() => {
            if !status {
                eprintln!("error: {}", report.text);
            }
        }
        OutputFormat::Text => {
            let _ = writeln!(stdout, "{}", report.text.trim_end());
        }
        OutputFormat::Json => {
            let value = serde_json::json!({
                "result": report.text,
                "session_id": agent.session.meta().id,
                "num_turns": report.num_turns,
                "usage": report.usage,
                "total_cost_usd": ferroclaw_core::pricing::cost(&agent.model_spec, &report.usage),
                "is_error": report.is_error(),
            });
            let _ = writeln!(stdout, "{value}");
        }
        OutputFormat::StreamJson => {}
    }
    let _ = stdout.flush();
    Ok(match report.outcome {
        Outcome::Answered => exit::OK,
        Outcome::Cancelled => exit::INTERRUPTED,
        Outcome::MaxTurns | Outcome::Failed(_) => exit::FAILED,
    })
}

/// `--output-format stream-json`: one event per line, flushed as it comes.
async fn json_lines(mut rx: UnboundedReceiver<AgentEvent>) {
    let mut out = std::io::stdout();
    while let Some(event) = rx.recv().await {
        if let Ok(mut line) = serde_json::to_vec(&event) {
            line.push(b'\n');
            let _ = out.write_all(&line);
            let _ = out.flush();
        }
    }
}

async fn drain(mut rx: UnboundedReceiver<AgentEvent>) {
    while rx.recv().await.is_some() {}
}
