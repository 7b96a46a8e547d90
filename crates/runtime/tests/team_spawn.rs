//! Starting teammates through the runtime: an isolated teammate's
//! `git worktree add` runs off the async threads, and a teammate's call
//! that needs the user's approval is refused with the rule that would allow
//! it, told to the teammate and to the lead.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_core::{Config, NoOneToAsk, Overrides};
use ferroclaw_mcp::McpHub;
use ferroclaw_runtime::team::{TeamRunner, TeammateSpec};
use ferroclaw_runtime::{Resume, Runtime, SessionOptions};
use ferroclaw_testkit::git::init_repo;
use ferroclaw_testkit::{ScriptedServer, Step, Turn};
use serde_json::json;

/// A lead agent with a team in `project`, on `server`.
fn lead(
    home: &Path,
    project: &Path,
    server: &ScriptedServer,
) -> (Arc<TeamRunner>, ferroclaw_core::Agent) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"scripted/m\"\n\n[providers.scripted]\nwire = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"k\"\n\n[team]\nidle_timeout_secs = 600\n",
            server.url()
        ),
    )
    .unwrap();
    let config =
        Config::load(home.to_path_buf(), project.to_path_buf(), &Overrides::default()).unwrap();
    let runtime = Runtime::with_hub(config, McpHub::empty()).unwrap();
    let mut agent =
        runtime.open(Resume::New, Arc::new(NoOneToAsk), SessionOptions::default()).unwrap().agent;
    let team = TeamRunner::new(&runtime);
    team.attach_lead(&mut agent).unwrap();
    (team, agent)
}

/// Waits until `path` holds `text` (a hang guard, not a timing check).
fn wait_for_text(path: &Path, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let content = std::fs::read_to_string(path).unwrap_or_default();
        if content.contains(text) {
            return content;
        }
        assert!(Instant::now() < deadline, "{} never held {text:?}: {content}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The folder the child test below works in; set only for that child.
const SLOW_GIT_DIR: &str = "FERROCLAW_TEST_SLOW_GIT_DIR";

/// On a single-threaded runtime, `git worktree add` (through a `git` first
/// on `PATH` that waits for a file another task on the same thread writes;
/// ferroclaw's own git runs no repository hook, so a hook cannot do it)
/// finishes only if the spawn does not hold the thread. `PATH` is the
/// process's own, so the check runs in a child test process.
#[test]
fn an_isolated_teammates_git_worktree_add_leaves_the_async_thread_free() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let (mark, seen) = (dir.path().join("other-task-ran"), dir.path().join("git-saw"));
    let wrapper = format!(
        "#!/bin/sh\ncase \" $* \" in *\" worktree add \"*)\n  i=0\n  while [ $i -lt 300 ]; do\n    if [ -e '{mark}' ]; then echo seen > '{seen}'; exec '{real}' \"$@\"; fi\n    sleep 0.1; i=$((i+1))\n  done\n  echo 'never saw it' > '{seen}';;\nesac\nexec '{real}' \"$@\"\n",
        mark = mark.display(),
        seen = seen.display(),
        real = real.display()
    );
    std::fs::write(bin.join("git"), wrapper).unwrap();
    std::fs::set_permissions(bin.join("git"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let mut path = vec![bin];
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "team_spawn::git_worktree_add_with_a_slow_git_on_path",
            "--ignored",
            "--nocapture",
        ])
        .env("PATH", std::env::join_paths(path).unwrap())
        .env(SLOW_GIT_DIR, dir.path())
        .output()
        .unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.contains("1 passed"), "{said}");
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "seen");
}

/// The child of the test above (skipped unless it sets the folder).
#[tokio::test(flavor = "current_thread")]
#[ignore = "run by an_isolated_teammates_git_worktree_add_leaves_the_async_thread_free"]
async fn git_worktree_add_with_a_slow_git_on_path() {
    let Some(dir) = std::env::var_os(SLOW_GIT_DIR).map(std::path::PathBuf::from) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let project = project.path().canonicalize().unwrap();
    init_repo(&project, "notes.txt", "main\n");
    let mark = dir.join("other-task-ran");
    let server = ScriptedServer::start(vec![Step::from(Turn::text("on it"))]);
    let (team, _lead) = lead(home.path(), &project, &server);

    let spec = TeammateSpec {
        name: "alice".into(),
        role: "writer".into(),
        prompt: "write".into(),
        worktree: Some("alice".into()),
        ..TeammateSpec::default()
    };
    let (spawned, ()) = tokio::join!(team.spawn(spec), async {
        tokio::task::yield_now().await;
        std::fs::write(&mark, "").unwrap();
    });
    spawned.unwrap();
    assert!(project.join(".agent/worktrees/alice/notes.txt").exists());
    team.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammates_call_that_needs_approval_is_refused_with_the_rule_and_the_homes_config_and_the_lead_is_told()
 {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(vec![
        Turn::tool("bash", json!({"command": "touch made-by-alice"})).into(),
        Turn::text("could not").into(),
    ]);
    let (team, _lead) = lead(home.path(), project.path(), &server);
    let spec = TeammateSpec {
        name: "alice".into(),
        role: "builder".into(),
        prompt: "make the file".into(),
        ..TeammateSpec::default()
    };
    team.spawn(spec).await.unwrap();

    let inbox = project.path().join(".agent/team/inbox/lead.jsonl");
    let told = wait_for_text(&inbox, "was refused");
    assert!(told.contains("alice's call bash(touch made-by-alice)"), "{told}");
    assert!(told.contains(r#"allow = [\"bash(touch:*)\"]"#), "{told}");
    // The config file named is the one this home's ferroclaw reads.
    let config = home.path().join("config.toml");
    assert!(told.contains(&format!("under [permissions] in {} or", config.display())), "{told}");
    assert!(!told.contains("~/.ferroclaw"), "{told}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().len() < 2 {
        assert!(Instant::now() < deadline, "alice never got her refusal back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("a teammate cannot ask the user"), "{second}");
    assert!(!project.path().join("made-by-alice").exists());
    team.stop_all().await;
}
