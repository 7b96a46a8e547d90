//! End-to-end: git worktrees driven by the scripted model through the real
//! binary: two worktrees hold the same file name apart, keep and remove
//! leave their events on disk, uncommitted work is not removed, isolation
//! that cannot be set up says why, and the REPL shows events live.

use crate::common;

use std::path::Path;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::{ScriptedToolCall, Turn};
use serde_json::json;

/// Worktree tools are offered in a git repository once a team is configured
/// (or the project has worktrees): `[team]` in the home config.
fn want_worktrees(env: &Env) {
    env.write_home_config("[team]\n");
}

/// Makes the workspace a repository with one commit.
fn init_repo(ws: &Path) {
    ferroclaw_testkit::git::init_repo(ws, "README.md", "# project\n");
}

fn events(ws: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(ws.join(".agent/worktrees/events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn call(name: &str, input: serde_json::Value) -> ScriptedToolCall {
    ScriptedToolCall::new(name, input)
}

#[test]
fn two_worktrees_hold_the_same_file_apart_and_keep_and_remove_are_recorded() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("task_create", json!({"subject": "try plan b"})).into(),
            Turn::tools(vec![
                call("worktree_create", json!({"name": "plan-a"})),
                call("worktree_create", json!({"name": "plan-b", "task_id": 1})),
            ])
            .into(),
            Turn::tools(vec![
                call(
                    "worktree_run",
                    json!({"name": "plan-a", "command": "echo from-a > notes.txt"}),
                ),
                call(
                    "worktree_run",
                    json!({"name": "plan-b", "command": "echo from-b > notes.txt"}),
                ),
            ])
            .into(),
            Turn::tool("worktree_run", json!({"name": "plan-a", "command": "cat notes.txt"}))
                .into(),
            Turn::tool("worktree_keep", json!({"name": "plan-a"})).into(),
            Turn::tool("worktree_remove", json!({"name": "plan-b", "complete_task": true})).into(),
            Turn::tool(
                "worktree_remove",
                json!({"name": "plan-b", "force": true, "complete_task": true}),
            )
            .into(),
            Turn::tool("worktree_events", json!({"limit": 3})).into(),
            Turn::text("done").into(),
        ],
    );
    init_repo(env.ws());
    want_worktrees(&env);
    let (code, stdout, stderr) = run(&mut env.oneshot("try both plans", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "done\n");

    let ws = env.ws();
    let a = ws.join(".agent/worktrees/plan-a");
    assert_eq!(std::fs::read_to_string(a.join("notes.txt")).unwrap(), "from-a\n");
    assert!(!ws.join("notes.txt").exists(), "the main checkout is untouched");
    let read = tool_results(&env.request_body(4));
    assert!(read.last().unwrap().0.contains("from-a"), "{read:?}");
    let refused = tool_results(&env.request_body(6));
    let refused = refused.last().unwrap();
    assert!(refused.1 && refused.0.contains("uncommitted changes"), "{refused:?}");
    assert!(refused.0.contains("notes.txt") && refused.0.contains("force"), "{refused:?}");
    let removed = tool_results(&env.request_body(7));
    assert!(removed.last().unwrap().0.contains("task #1 try plan b is completed"), "{removed:?}");
    assert!(!ws.join(".agent/worktrees/plan-b").exists());

    let names: Vec<String> =
        events(ws).iter().map(|e| e["event"].as_str().unwrap().to_string()).collect();
    assert_eq!(
        names,
        [
            "worktree.create.before",
            "worktree.create.after",
            "worktree.create.before",
            "worktree.create.after",
            "worktree.keep",
            "worktree.remove.before",
            "worktree.remove.failed",
            "worktree.remove.before",
            "worktree.remove.after",
            "task.completed",
        ]
    );
    assert_eq!(events(ws)[3]["task"], 1);
    let shown = tool_results(&env.request_body(8));
    assert!(shown.last().unwrap().0.contains("task.completed plan-b (task #1)"), "{shown:?}");
    let task: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.join(".agent/tasks/task_1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (task["status"].as_str(), task["worktree"].as_str()),
        (Some("completed"), Some("plan-b"))
    );

    let (code, listing, _) = run(env.cmd().arg("worktrees"));
    assert_eq!(code, 0);
    assert!(listing.contains("kept     plan-a  wt/plan-a"), "{listing}");
    assert!(listing.contains("removed  plan-b  wt/plan-b  task #1"), "{listing}");
    assert!(
        listing.contains(
            "worktree.remove.failed plan-b (task #1): worktree \"plan-b\" has uncommitted"
        ),
        "{listing}"
    );
}

#[test]
fn isolation_that_cannot_be_set_up_says_why_and_changes_nothing() {
    // A main checkout with an uncommitted edit: a worktree from HEAD would
    // silently lack it.
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::tool("worktree_create", json!({"name": "a"})).into(), Turn::text("no").into()],
    );
    init_repo(env.ws());
    want_worktrees(&env);
    std::fs::write(env.ws().join("README.md"), "# edited\n").unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("isolate", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    let result = tool_results(&env.request_body(1));
    let result = result.last().unwrap();
    assert!(result.1 && result.0.contains("uncommitted changes (README.md)"), "{result:?}");
    assert!(!env.ws().join(".agent/worktrees/a").exists());
    let names: Vec<String> =
        events(env.ws()).iter().map(|e| e["event"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["worktree.create.before", "worktree.create.failed"]);

    // Outside git the tools are not offered at all, and the command says why.
    let env = Env::new(Wire::Anthropic, vec![Turn::text("hi").into()]);
    want_worktrees(&env);
    assert_eq!(run(&mut env.oneshot("hello", &[])).0, 0);
    let offered = env.request_body(0)["tools"].to_string();
    assert!(offered.contains("task_create") && !offered.contains("worktree_create"));
    let (code, listing, _) = run(env.cmd().arg("worktrees"));
    assert_eq!(code, 0);
    assert!(listing.contains("not in a git repository"), "{listing}");
}

#[test]
fn the_repl_prints_worktree_events_as_they_happen() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("worktree_create", json!({"name": "live"})).into(),
            Turn::text("made it").into(),
        ],
    );
    init_repo(env.ws());
    want_worktrees(&env);
    let (code, stdout, stderr) =
        run(env.cmd().arg("--yes").write_stdin("make a worktree\n/exit\n"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("made it"), "{stdout}");
    assert!(
        stderr.contains("[worktree]") && stderr.contains("worktree.create.after live"),
        "{stderr}"
    );
}

#[test]
fn a_git_project_without_a_team_or_worktrees_is_not_offered_the_worktree_tools() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("hi").into()]);
    init_repo(env.ws());
    assert_eq!(run(&mut env.oneshot("hello", &[])).0, 0);
    let offered = env.request_body(0)["tools"].to_string();
    assert!(offered.contains("task_create") && !offered.contains("worktree_create"), "{offered}");
}

/// Runs git with `GIT_DIR` set to a bare repository, feeding `input`.
fn git_in(git_dir: &Path, args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .args(args)
        .env("GIT_DIR", git_dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_cloned_repository_cannot_run_a_command_through_the_worktree_tools() {
    // What a hostile repository can carry in plain files: a bare repository
    // at `.agent/worktrees/x` whose config runs a program for every signed
    // commit `git log` shows, a signed commit, and an index naming it as a
    // worktree (which also gets the worktree tools offered). The read-only
    // worktree_status runs without asking in the default mode.
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::tool("worktree_status", json!({"name": "x"})).into(), Turn::text("ok").into()],
    );
    init_repo(env.ws());
    let planted = env.ws().join(".agent/worktrees/x");
    std::fs::create_dir_all(&planted).unwrap();
    ferroclaw_testkit::git::git(&planted, &["init", "-q", "--bare", "-b", "main"]);
    let marker = env.home.path().join("PWNED");
    let program = env.ws().join("evil.sh");
    std::fs::write(&program, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let config = planted.join("config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {}\n[core]\n\tfsmonitor = {}\n",
        program.display(),
        program.display()
    ));
    std::fs::write(&config, text).unwrap();
    let tree = git_in(&planted, &["mktree"], "");
    let who = "author a <a@a> 1 +0000\ncommitter a <a@a> 1 +0000\n";
    let root = git_in(
        &planted,
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        &format!("tree {tree}\n{who}\nroot\n"),
    );
    let signed = git_in(
        &planted,
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        &format!(
            "tree {tree}\nparent {root}\n{who}gpgsig -----BEGIN PGP SIGNATURE-----\n \n x\n -----END PGP SIGNATURE-----\n\nsigned\n"
        ),
    );
    std::fs::write(planted.join("refs/heads/main"), format!("{signed}\n")).unwrap();
    let index = json!({"worktrees": [{
        "name": "x", "path": planted, "branch": "wt/x", "base_ref": "HEAD",
        "base_commit": root, "status": "active",
    }]});
    std::fs::write(env.ws().join(".agent/worktrees/index.json"), index.to_string()).unwrap();

    let (code, _, stderr) = run(&mut env.oneshot("how is worktree x?", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!marker.exists(), "the repository's own program ran");
}

/// A worktree made in one run is removed in the next: the new process finds
/// `.agent/worktrees/NAME` as a repository inside the project, whose `.git`
/// file every command gets read-only, yet ferroclaw's own `git worktree
/// remove` deletes it; and a command cannot rewrite that `.git` file.
#[test]
fn a_worktree_made_in_an_earlier_run_is_removed_and_its_git_file_is_not_a_commands_to_change() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("worktree_create", json!({"name": "later"})).into(),
            Turn::text("made").into(),
            Turn::tool(
                "bash",
                json!({"command": "python3 -c \"open('.agent/worktrees/' + 'later/.git', 'w').write('gitdir: /tmp/elsewhere')\"; echo tried"}),
            )
            .into(),
            Turn::tool("worktree_remove", json!({"name": "later"})).into(),
            Turn::text("removed").into(),
        ],
    );
    want_worktrees(&env);
    init_repo(env.ws());
    let (code, _, err) = run(&mut env.oneshot("make one", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let git_file = env.ws().join(".agent/worktrees/later/.git");
    let before = std::fs::read_to_string(&git_file).unwrap();
    let (code, out, err) = run(&mut env.oneshot("remove it", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("removed"), "{out}");
    let tried = tool_results(&env.request_body(3));
    let tried = &tried.last().unwrap().0;
    assert!(tried.contains("Read-only file system") && tried.contains("tried"), "{tried}");
    let removed = tool_results(&env.request_body(4));
    assert!(!removed.last().unwrap().1, "the removal failed: {removed:?}");
    assert!(!before.contains("elsewhere"));
    assert!(!env.ws().join(".agent/worktrees/later").exists());
}
