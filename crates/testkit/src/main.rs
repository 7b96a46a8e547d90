//! `scripted-llm`: serves a JSON script of LLM answers until killed (see the crate docs).

use std::{io::Write, path::PathBuf, process::ExitCode};

use ferroclaw_testkit::{ScriptedServer, ServerOptions, Step};

const USAGE: &str = "usage: scripted-llm --script FILE.json [--port N] [--repeat] \
[--openai-repeat-id-and-name] [--openai-usage-always] [--strict] [--record FILE.jsonl] \
[--route MARKER=FILE.json]...";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("scripted-llm: {message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let mut script = None;
    // Nobody asks this process for its requests: they go to --record only.
    let mut options = ServerOptions { forget_requests: true, ..ServerOptions::default() };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--script" => script = Some(PathBuf::from(value()?)),
            "--port" => {
                let port = value()?;
                options.port =
                    port.parse().map_err(|_| format!("--port {port}: not a port number"))?;
            }
            "--record" => options.record_path = Some(PathBuf::from(value()?)),
            "--repeat" => options.repeat = true,
            "--openai-repeat-id-and-name" => options.openai_repeat_id_and_name = true,
            "--openai-usage-always" => options.openai_usage_always = true,
            "--strict" => options.strict = true,
            "--route" => {
                let route = value()?;
                let (marker, file) = route
                    .split_once('=')
                    .ok_or_else(|| format!("--route {route}: expected MARKER=FILE.json"))?;
                options.routes.push((marker.to_string(), read_steps(&PathBuf::from(file))?));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let path = script.ok_or("--script is required")?;
    let steps = read_steps(&path)?;
    let server = ScriptedServer::try_start_with(steps, options)
        .map_err(|error| format!("cannot start: {error}"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", server.url())
        .and_then(|()| stdout.flush())
        .map_err(|e| e.to_string())?;
    drop(stdout);
    loop {
        std::thread::park();
    }
}

/// The steps of a script file.
fn read_steps(path: &std::path::Path) -> Result<Vec<Step>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))
}
