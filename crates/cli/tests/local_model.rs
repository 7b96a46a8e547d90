//! End-to-end: the real binary with an embedded local model. The model tests
//! run SmolLM2-135M (`FERROCLAW_TEST_GGUF`, else where `scripts/test` puts
//! it in `~/.cache/ferroclaw-models`) through the agent loop; they assert
//! structure and protocol, never the model's wisdom. Without the model they
//! fail, unless the developer opted out (`FERROCLAW_TEST_SKIP=model`). The
//! `model` subcommand tests need no model.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferroclaw_protocol::AgentEvent;
use ferroclaw_testkit::components::{self, Component};

/// The test model (scripts/test fetches it); `None` only when the developer
/// opted out (`FERROCLAW_TEST_SKIP=model`).
#[track_caller]
fn model_path() -> Option<PathBuf> {
    components::require(Component::TestModel, components::test_model())
}

/// A temp home and workspace, and the binary with no provider key at all.
struct Env {
    home: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let env =
            Env { home: tempfile::tempdir().unwrap(), workspace: tempfile::tempdir().unwrap() };
        std::fs::write(env.workspace.path().join("notes.txt"), "alpha\n").unwrap();
        std::fs::write(env.workspace.path().join("plan.md"), "# plan\n").unwrap();
        env
    }

    fn cmd(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("FERROCLAW_HOME", self.home.path())
            // One thread and a fixed seed: a repeatable run on a busy machine.
            .env("FERROCLAW_LOCAL_THREADS", "1")
            .env("FERROCLAW_LOCAL_SEED", "7")
            .current_dir(self.workspace.path());
        cmd
    }

    /// Writes `$FERROCLAW_HOME/config.toml`.
    fn config(&self, text: &str) {
        std::fs::write(self.home.path().join("config.toml"), text).unwrap();
    }
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Tools a wrong guess of a tiny model must not run in these tests.
const DENY_WRITES: &str = "[permissions]\ndeny = [\"bash\", \"background_run\", \"kill_background\", \"write\", \"*edit\", \"memory\", \"web_*\", \"task\"]\n";

/// The README's first command, with no switch: the model's first answer
/// is a real, grammar-valid tool call (its own, or its made-up answer redone
/// as one), the tool runs, and the next turn answers.
#[test]
fn the_readmes_first_command_makes_a_real_tool_call_with_no_switch_and_answers() {
    let Some(model) = model_path() else { return };
    let env = Env::new();
    env.config(DENY_WRITES);
    let spec = format!("local:{}", model.display());
    let (code, stdout, stderr) = run(env
        .cmd()
        .args(["--model", &spec, "--yes", "--max-turns", "4", "--output-format", "stream-json"])
        .args(["-p", "List the files in this folder."]));
    let events: Vec<AgentEvent> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stderr}")))
        .collect();
    let started: Vec<(&String, &String, &serde_json::Value)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallStarted { id, name, input } => Some((id, name, input)),
            _ => None,
        })
        .collect();
    assert!(!started.is_empty(), "the first answer is a tool call: {stdout}\n{stderr}");
    let (id, name, input) = started[0];
    assert!(input.is_object(), "{name} {input}");
    let finished =
        events.iter().any(|e| matches!(e, AgentEvent::ToolCallFinished { id: f, .. } if f == id));
    assert!(finished, "the call ran and its result went back: {stdout}");
    let Some(AgentEvent::Finished { result, num_turns, usage, .. }) = events.last() else {
        panic!("no finished event: {stdout}\n{stderr}");
    };
    assert!(*num_turns >= 2, "a turn after the tool result: {stdout}");
    assert!(usage.cache_read_tokens > 0, "turn 2 reused turn 1's prefix: {usage:?}");
    if code == 0 {
        assert!(!result.trim().is_empty(), "a final answer: {stdout}");
    } else {
        // A tiny model may keep calling tools until --max-turns: still a
        // well-formed run, reported as such.
        assert!(stderr.contains("turn") || result.contains("turn"), "{code}: {stderr}");
    }
}

/// The lean profile's budget for system prompt and tools, in SmolLM2 tokens.
const LEAN_PREFIX_CAP: usize = 1_200;

/// The number after `label` in a log line such as "saved 812 prompt tokens".
fn logged_count(stderr: &str, label: &str) -> Option<usize> {
    let line = stderr.lines().find(|l| l.contains(label))?;
    let before = &line[..line.find(label)?];
    before.split_whitespace().last()?.parse().ok()
}

#[test]
fn a_second_process_restores_the_saved_prompt_state_and_a_bad_file_is_rebuilt() {
    let Some(model) = model_path() else { return };
    let env = Env::new();
    env.config(&format!("max_tokens = 8\n{DENY_WRITES}"));
    let spec = format!("local:{}", model.display());
    let once = || {
        run(env
            .cmd()
            .env("FERROCLAW_LOG", "ferroclaw_local=debug")
            .args(["--model", &spec, "--max-turns", "1", "--output-format", "json"])
            .args(["-p", "Say hi."]))
    };
    let usage = |stdout: &str| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(stdout.trim())
            .map_or(serde_json::Value::Null, |v| v["usage"].clone())
    };
    let (_, stdout, stderr) = once();
    let saved = logged_count(&stderr, " prompt tokens to ").expect(&stderr);
    assert!(saved < LEAN_PREFIX_CAP, "lean system + tools is {saved} SmolLM2 tokens");
    assert_eq!(usage(&stdout)["cache_read_input_tokens"], 0, "{stdout}");
    let kv = env.home.path().join("cache/kv");
    let files: Vec<PathBuf> = std::fs::read_dir(&kv)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "kv"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");

    let (_, stdout, stderr) = once();
    assert_eq!(logged_count(&stderr, " prompt tokens from "), Some(saved), "{stderr}");
    assert_eq!(usage(&stdout)["cache_read_input_tokens"], saved as u64, "{stdout}");

    // A truncated file is ignored, deleted and written again.
    let len = std::fs::metadata(&files[0]).unwrap().len();
    let file = std::fs::File::options().write(true).open(&files[0]).unwrap();
    file.set_len(len / 2).unwrap();
    let (_, stdout, stderr) = once();
    assert!(stderr.contains("ignored prompt state"), "{stderr}");
    assert_eq!(logged_count(&stderr, " prompt tokens to "), Some(saved), "{stderr}");
    assert_eq!(usage(&stdout)["cache_read_input_tokens"], 0, "{stdout}");
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), len, "rebuilt whole");

    // A whole, sealed file that holds another prompt (here: the prefix of
    // another folder, copied over this one's with its checksum) passes the
    // checksum but not llama.cpp's or the token check: ignored, deleted and
    // rebuilt.
    let other = tempfile::tempdir().unwrap();
    let (_, _, stderr) = run(env
        .cmd()
        .current_dir(other.path())
        .env("FERROCLAW_LOG", "ferroclaw_local=debug")
        .args(["--model", &spec, "--max-turns", "1", "-p", "Say hi."]));
    let other_file = std::fs::read_dir(&kv)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "kv") && *p != files[0])
        .unwrap_or_else(|| panic!("a second folder saves its own prefix: {stderr}"));
    std::fs::copy(&other_file, &files[0]).unwrap();
    std::fs::copy(other_file.with_extension("sum"), files[0].with_extension("sum")).unwrap();
    let (_, stdout, stderr) = once();
    assert!(stderr.contains("ignored prompt state"), "{stderr}");
    assert_eq!(logged_count(&stderr, " prompt tokens to "), Some(saved), "{stderr}");
    assert_eq!(usage(&stdout)["cache_read_input_tokens"], 0, "{stdout}");
    let (_, stdout, _) = once();
    assert_eq!(usage(&stdout)["cache_read_input_tokens"], saved as u64, "the rebuilt file is used");
}

#[test]
fn with_no_key_the_installed_local_model_is_used_and_said_so_in_one_line() {
    let Some(model) = model_path() else { return };
    let env = Env::new();
    let models = env.home.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(&model, models.join("smollm2-135m-instruct.gguf")).unwrap();
    let (code, stdout, stderr) = run(env.cmd().args(["-p", "Say hello."]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.trim().is_empty());
    let notice: Vec<&str> = stderr.lines().filter(|l| l.contains("local model")).collect();
    assert_eq!(notice.len(), 1, "{stderr}");
    assert!(notice[0].contains("local/smollm2-135m-instruct"), "{stderr}");
}

#[test]
fn no_key_and_no_local_model_names_the_three_ways_forward() {
    let env = Env::new();
    let (code, _, stderr) = run(env.cmd().args(["-p", "hi"]));
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for way in ["ANTHROPIC_API_KEY", "ferroclaw init", "ferroclaw model pull"] {
        assert!(stderr.contains(way), "{way}: {stderr}");
    }
}

#[test]
fn a_missing_local_model_lists_what_is_installed_and_how_to_get_one() {
    let env = Env::new();
    let (code, _, stderr) = run(env.cmd().args(["-p", "hi", "--model", "local/nope"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("\"nope\"") && stderr.contains("ferroclaw model pull"), "{stderr}");
}

/// A fake GGUF: right magic, nonsense after.
fn fake_gguf(dir: &Path) -> PathBuf {
    let p = dir.join("Tiny-Test.Q4.gguf");
    let mut data = b"GGUF".to_vec();
    data.extend((0..50_000u32).map(|i| (i % 251) as u8));
    std::fs::write(&p, data).unwrap();
    p
}

#[test]
fn model_import_list_and_rm_manage_the_store() {
    let env = Env::new();
    let file = fake_gguf(env.workspace.path());
    let (code, stdout, stderr) = run(env.cmd().args(["model", "import"]).arg(&file));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("local/Tiny-Test.Q4"), "{stdout}");
    assert!(env.home.path().join("models/Tiny-Test.Q4.gguf").is_file());
    let (code, stdout, _) = run(env.cmd().args(["model", "list"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("local/Tiny-Test.Q4"), "{stdout}");
    assert!(stdout.contains("smollm2-135m-instruct") && stdout.contains("qwen3-4b"), "{stdout}");
    let (code, _, stderr) = run(env.cmd().args(["model", "rm", "Tiny-Test.Q4"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!env.home.path().join("models/Tiny-Test.Q4.gguf").exists());
    let (code, _, stderr) = run(env.cmd().args(["model", "rm", "Tiny-Test.Q4"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("no local model named"), "{stderr}");
}

#[test]
fn model_pull_downloads_a_url_verifies_it_and_installs_it() {
    let env = Env::new();
    let body = std::fs::read(fake_gguf(env.workspace.path())).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/files/tiny.gguf", listener.local_addr().unwrap());
    let served = body.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let mut s = stream;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                served.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&served);
            let _ = s.read(&mut [0u8; 1]);
        }
    });
    let wrong = "1".repeat(64);
    let (code, _, stderr) = run(env.cmd().args(["model", "pull", &url, "--sha256", &wrong]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    assert!(!env.home.path().join("models/tiny.gguf").exists());

    let (code, stdout, stderr) = run(env.cmd().args(["model", "pull", &url]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("installed local/tiny"), "{stdout}");
    assert!(stderr.contains("tiny: 100%"), "progress on stderr: {stderr}");
    assert!(stderr.contains("no published checksum"), "{stderr}");
    assert_eq!(std::fs::read(env.home.path().join("models/tiny.gguf")).unwrap(), body);
}

#[test]
fn model_pull_from_an_unreachable_host_says_so_once_and_how_to_import_instead() {
    let env = Env::new();
    // A port nothing listens on: the connection is refused at once.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/files/tiny.gguf");
    let (code, _, stderr) = run(env.cmd().args(["model", "pull", &url]));
    assert_eq!(code, 2, "{stderr}");
    let error = stderr.lines().find(|l| l.starts_with("ferroclaw: ")).expect(&stderr);
    assert!(error.starts_with(&format!("ferroclaw: cannot reach {url}: ")), "{error}");
    assert_eq!(error.matches(&url).count(), 1, "the URL is named once: {error}");
    assert!(error.ends_with("add it with `ferroclaw model import FILE`"), "{error}");
    assert!(!env.home.path().join("models/tiny.gguf").exists());
}
