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

/// On a single-threaded runtime, git's post-checkout hook (run by
/// `git worktree add`) waits for a file that another task on the same
/// thread writes: it appears only if the spawn does not hold the thread.
#[tokio::test(flavor = "current_thread")]
async fn an_isolated_teammates_git_worktree_add_leaves_the_async_thread_free() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let project = project.path().canonicalize().unwrap();
    init_repo(&project, "notes.txt", "main\n");
    let mark = home.path().join("other-task-ran");
    let seen = home.path().join("hook-saw");
    let hook = project.join(".git/hooks/post-checkout");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ni=0\nwhile [ $i -lt 300 ]; do\n  if [ -e '{mark}' ]; then echo seen > '{seen}'; exit 0; fi\n  sleep 0.1; i=$((i+1))\ndone\necho 'never saw it' > '{seen}'\n",
            mark = mark.display(),
            seen = seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
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
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "seen");
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
