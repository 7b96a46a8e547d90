//! `ferroclaw eval tools [--model M] [--task NAME]`: an honest offline check
//! of a model's tool use. Twenty small tasks, each in a fresh generated
//! folder (list the files, read a file and answer from it, find a string,
//! create a file, fix a typo with `edit`, run a command and report its
//! output, ...), each judged by a predicate on the files or the answer.
//! Prints one line per task (pass or fail, turns, tool calls, tokens, time)
//! and the pass rate. The agent runs as `-p --yes` would, in the fixture
//! folder, with a throwaway home (sessions and memory go nowhere).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Subcommand;
use ferroclaw_core::{Config, NoOneToAsk, PermissionMode};
use ferroclaw_protocol::AgentEvent;
use tokio_util::sync::CancellationToken;

use crate::exit;
use crate::setup::SetupError;
use ferroclaw_runtime::{Resume, Runtime, SessionOptions};
use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};

/// Model round-trips allowed per task: a call, its result, an answer, with
/// room for one wrong step.
pub(crate) const EVAL_MAX_TURNS: u32 = 6;

/// Characters of a failed task's answer shown in its line.
const NOTE_CHARS: usize = 60;

/// Longest a task may take before it counts as failed.
pub(crate) const TASK_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Subcommand)]
pub(crate) enum EvalAction {
    /// Twenty small tool-use tasks, each checked on the files or the answer.
    Tools {
        /// The model to evaluate (default: the configured one).
        #[arg(short = 'm', long)]
        model: Option<String>,
        /// Run only these tasks (by name; repeatable).
        #[arg(long = "task", value_name = "NAME")]
        tasks: Vec<String>,
    },
    /// The skill-learning review on labelled fixture conversations
    /// (skip / create / patch): accuracy per label and a confusion table.
    Learning {
        /// A folder of cases (`*.json`), e.g. eval/learning in the source tree.
        dataset: std::path::PathBuf,
        /// The reviewer model (default: `learning.model`, else the configured one).
        #[arg(short = 'm', long)]
        model: Option<String>,
    },
}

/// What a task's check gets: the fixture folder after the run and the final answer.
type Check = fn(&Path, &str) -> bool;

/// One task: its files, the request, and how to judge the result.
pub(crate) struct Task {
    pub name: &'static str,
    pub files: &'static [(&'static str, &'static str)],
    pub prompt: &'static str,
    check: Check,
}

fn read(ws: &Path, rel: &str) -> String {
    read_repo_text(&ws.join(rel), MAX_REPO_FILE_BYTES).unwrap_or_default()
}

fn has_all(answer: &str, words: &[&str]) -> bool {
    let answer = answer.to_lowercase();
    words.iter().all(|w| answer.contains(&w.to_lowercase()))
}

/// The tasks, in order.
pub(crate) const TASKS: [Task; 20] = [
    Task {
        name: "list-files",
        files: &[("alpha.txt", "a\n"), ("beta.md", "b\n"), ("gamma.rs", "fn main() {}\n")],
        prompt: "List the files in this folder.",
        check: |_, a| has_all(a, &["alpha.txt", "beta.md", "gamma.rs"]),
    },
    Task {
        name: "read-answer",
        files: &[("notes.txt", "Meeting notes.\nThe secret word is pineapple.\n")],
        prompt: "What is the secret word in notes.txt?",
        check: |_, a| has_all(a, &["pineapple"]),
    },
    Task {
        name: "read-config-value",
        files: &[("server.ini", "[server]\nhost = example.org\nport = 8472\n")],
        prompt: "Which port is set in server.ini?",
        check: |_, a| a.contains("8472"),
    },
    Task {
        name: "read-json-value",
        files: &[("package.json", "{\"name\": \"demo-app\", \"version\": \"1.4.2\"}\n")],
        prompt: "What version is in package.json?",
        check: |_, a| a.contains("1.4.2"),
    },
    Task {
        name: "read-first-line",
        files: &[("poem.txt", "Roses are red,\nviolets are blue.\n")],
        prompt: "What is the first line of poem.txt?",
        check: |_, a| has_all(a, &["roses are red"]),
    },
    Task {
        name: "grep-word",
        files: &[
            ("src/lexer.rs", "pub fn lex() {}\n"),
            ("src/parser.rs", "// TODO: handle nested lists\npub fn parse() {}\n"),
            ("src/main.rs", "fn main() {}\n"),
        ],
        prompt: "Which file contains the word TODO?",
        check: |_, a| has_all(a, &["parser.rs"]) && !has_all(a, &["lexer.rs"]),
    },
    Task {
        name: "grep-function",
        files: &[
            ("util.py", "def helper():\n    pass\n"),
            ("billing.py", "def compute_total(items):\n    return sum(items)\n"),
        ],
        prompt: "In which file is the function compute_total defined?",
        check: |_, a| has_all(a, &["billing.py"]),
    },
    Task {
        name: "glob-markdown",
        files: &[("docs/guide.md", "# Guide\n"), ("docs/api.md", "# API\n"), ("src/app.rs", "\n")],
        prompt: "Find all Markdown (.md) files in this project.",
        check: |_, a| has_all(a, &["guide.md", "api.md"]),
    },
    Task {
        name: "list-subfolder",
        files: &[("assets/logo.png", "png"), ("assets/icon.svg", "<svg/>"), ("main.c", "\n")],
        prompt: "List the files in the assets folder.",
        check: |_, a| has_all(a, &["logo.png", "icon.svg"]),
    },
    Task {
        name: "create-file",
        files: &[],
        prompt: "Create a file named hello.txt containing exactly: Hello, world!",
        check: |ws, _| read(ws, "hello.txt").trim() == "Hello, world!",
    },
    Task {
        name: "create-nested-file",
        files: &[],
        prompt: "Create the file notes/today.txt with the text: done",
        check: |ws, _| read(ws, "notes/today.txt").trim() == "done",
    },
    Task {
        name: "create-json",
        files: &[],
        prompt: "Create settings.json containing the JSON object {\"debug\": true}.",
        check: |ws, _| {
            serde_json::from_str::<serde_json::Value>(&read(ws, "settings.json"))
                .is_ok_and(|v| v["debug"] == true)
        },
    },
    Task {
        name: "edit-typo",
        files: &[("readme.md", "# Tool\n\nThis is teh best tool.\n")],
        prompt: "Fix the typo in readme.md: 'teh' should be 'the'.",
        check: |ws, _| {
            let t = read(ws, "readme.md");
            t.contains("This is the best tool.") && t.starts_with("# Tool")
        },
    },
    Task {
        name: "edit-string",
        files: &[("greet.py", "def greet():\n    print('helo')\n")],
        prompt: "In greet.py, change 'helo' to 'hello'.",
        check: |ws, _| {
            let t = read(ws, "greet.py");
            t.contains("print('hello')") && t.contains("def greet():")
        },
    },
    Task {
        name: "append-line",
        files: &[("shopping.txt", "eggs\nbread\n")],
        prompt: "Add the item milk as a new line at the end of shopping.txt.",
        check: |ws, _| {
            let t = read(ws, "shopping.txt");
            t.contains("eggs") && t.contains("bread") && t.lines().any(|l| l.trim() == "milk")
        },
    },
    Task {
        name: "remove-line",
        files: &[("todo.txt", "buy milk\ncall bob\nwater plants\n")],
        prompt: "Remove the line 'call bob' from todo.txt.",
        check: |ws, _| {
            let t = read(ws, "todo.txt");
            !t.contains("call bob") && t.contains("buy milk") && t.contains("water plants")
        },
    },
    Task {
        name: "bash-echo",
        files: &[],
        prompt: "Run the command `echo ferroclaw-42` and tell me its output.",
        check: |_, a| a.contains("ferroclaw-42"),
    },
    Task {
        name: "bash-reverse",
        files: &[],
        prompt: "Run `printf stressed | rev` and report what it prints.",
        check: |_, a| has_all(a, &["desserts"]),
    },
    Task {
        name: "count-lines",
        files: &[("data.csv", "id,name\n1,a\n2,b\n3,c\n4,d\n5,e\n6,f\n")],
        prompt: "How many lines does data.csv have?",
        check: |_, a| a.contains('7'),
    },
    Task {
        name: "count-files",
        files: &[("one.txt", "1"), ("two.txt", "2"), ("three.txt", "3"), ("four.txt", "4")],
        prompt: "How many .txt files are in this folder?",
        check: |_, a| a.contains('4') || has_all(a, &["four"]),
    },
];

/// One task's outcome.
struct Outcome {
    passed: bool,
    turns: u32,
    calls: usize,
    usage: ferroclaw_protocol::Usage,
    elapsed: Duration,
    note: String,
}

/// Runs `eval` subcommands.
pub(crate) async fn run(action: &EvalAction, config: &Config) -> Result<i32, SetupError> {
    let (model, tasks) = match action {
        EvalAction::Tools { model, tasks } => (model, tasks),
        EvalAction::Learning { dataset, model } => {
            return crate::eval_learning::run(dataset, model.as_deref(), config).await;
        }
    };
    for name in tasks {
        if !TASKS.iter().any(|t| t.name == name) {
            let names: Vec<&str> = TASKS.iter().map(|t| t.name).collect();
            return Err(SetupError::Other(format!(
                "no eval task {name:?}; tasks: {}",
                names.join(", ")
            )));
        }
    }
    let spec = match model {
        Some(m) => m.clone(),
        None => config.model_spec()?,
    };
    // A local model by name is pinned to its file: the home below is empty.
    let spec = match ferroclaw_runtime::local_model_path(config, &spec) {
        Some(Ok(path)) => format!("local:{}", path.display()),
        Some(Err(e)) => return Err(SetupError::Other(e)),
        None => spec,
    };
    let scratch = tempfile::tempdir()
        .map_err(|e| SetupError::Other(format!("cannot make a scratch folder: {e}")))?;
    let home = scratch.path().join("home");
    let selected: Vec<&Task> =
        TASKS.iter().filter(|t| tasks.is_empty() || tasks.iter().any(|n| n == t.name)).collect();
    println!("eval tools: {spec}, {} tasks, up to {EVAL_MAX_TURNS} turns each", selected.len());
    let mut passed = 0;
    let mut ran = 0;
    let mut total = ferroclaw_protocol::Usage::default();
    let started = Instant::now();
    for task in selected {
        let ws = scratch.path().join(task.name);
        make_fixture(&ws, task)?;
        let mut task_config = config.clone();
        task_config.home = home.clone();
        task_config.workspace =
            ws.canonicalize().map_err(|e| SetupError::Other(format!("{}: {e}", ws.display())))?;
        task_config.file.model = Some(spec.clone());
        task_config.file.max_turns = Some(EVAL_MAX_TURNS);
        task_config.file.permission_mode = Some(PermissionMode::Bypass);
        let outcome = run_task(&task_config, task).await?;
        ran += 1;
        passed += usize::from(outcome.passed);
        total.input_tokens += outcome.usage.input_tokens;
        total.output_tokens += outcome.usage.output_tokens;
        total.cache_read_tokens += outcome.usage.cache_read_tokens;
        println!(
            "{} {:<20} {} turns {:>2} calls {:>6} in ({:>6} cached) {:>5} out {:>6.1} s{}",
            if outcome.passed { "PASS" } else { "FAIL" },
            task.name,
            outcome.turns,
            outcome.calls,
            outcome.usage.input_tokens,
            outcome.usage.cache_read_tokens,
            outcome.usage.output_tokens,
            outcome.elapsed.as_secs_f64(),
            if outcome.note.is_empty() { String::new() } else { format!("  ({})", outcome.note) },
        );
    }
    println!(
        "passed {passed}/{ran} ({:.0}%), {} in ({} cached), {} out, {:.1} s",
        100.0 * passed as f64 / ran.max(1) as f64,
        total.input_tokens,
        total.cache_read_tokens,
        total.output_tokens,
        started.elapsed().as_secs_f64()
    );
    Ok(exit::OK)
}

fn make_fixture(ws: &Path, task: &Task) -> Result<(), SetupError> {
    let fail = |e: std::io::Error| SetupError::Other(format!("cannot write the fixture: {e}"));
    std::fs::create_dir_all(ws).map_err(fail)?;
    for (rel, text) in task.files {
        let path = ws.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        std::fs::write(path, text).map_err(fail)?;
    }
    Ok(())
}

async fn run_task(config: &Config, task: &Task) -> Result<Outcome, SetupError> {
    let started = Instant::now();
    // Each task has its own folder, so its own runtime (no MCP servers).
    let runtime = Runtime::with_hub(config.clone(), ferroclaw_mcp::McpHub::empty())?;
    let mut agent =
        runtime.open(Resume::New, Arc::new(NoOneToAsk), SessionOptions::default())?.agent;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let counter = tokio::spawn(async move {
        let mut calls = 0;
        while let Some(event) = rx.recv().await {
            calls += usize::from(matches!(event, AgentEvent::ToolCallStarted { .. }));
        }
        calls
    });
    let cancel = CancellationToken::new();
    let message = ferroclaw_core::mentions::user_message(task.prompt, agent.workspace());
    let run = agent.run(message, &tx, &cancel);
    let report = tokio::time::timeout(TASK_TIMEOUT, run).await;
    agent.finish().await;
    drop(tx);
    let calls = counter.await.unwrap_or(0);
    let elapsed = started.elapsed();
    let Ok(report) = report else {
        return Ok(Outcome {
            passed: false,
            turns: 0,
            calls,
            usage: Default::default(),
            elapsed,
            note: format!("timed out after {} s", TASK_TIMEOUT.as_secs()),
        });
    };
    let passed = (task.check)(&config.workspace, &report.text);
    // A failure shows the start of the answer (or the error), on one line.
    let note = if passed {
        String::new()
    } else {
        let flat = report.text.split_whitespace().collect::<Vec<_>>().join(" ");
        let cut: String = flat.chars().take(NOTE_CHARS).collect();
        if cut.len() < flat.len() { format!("{cut}...") } else { cut }
    };
    Ok(Outcome { passed, turns: report.num_turns, calls, usage: report.usage, elapsed, note })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names_are_unique_and_fixtures_fail_their_checks_untouched() {
        let mut names: Vec<&str> = TASKS.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TASKS.len());
        // Doing nothing and saying nothing passes no task.
        for task in &TASKS {
            let dir = tempfile::tempdir().unwrap();
            make_fixture(dir.path(), task).unwrap();
            assert!(!(task.check)(dir.path(), ""), "{} passes with no work", task.name);
        }
    }
}
