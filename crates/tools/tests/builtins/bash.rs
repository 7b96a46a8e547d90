use std::time::{Duration, Instant};

use serde_json::json;

use crate::process::gone;
use crate::workspace;

fn pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

#[tokio::test]
async fn bash_runs_in_the_workspace_and_reports_the_exit_code() {
    let ws = workspace();
    ws.write("hello.txt", "hi");
    let out = ws.ok("bash", json!({"command": "cat hello.txt; echo; pwd"})).await;
    assert!(out.starts_with("hi\n"), "{out}");
    assert!(
        out.contains(&std::fs::canonicalize(ws.dir.path()).unwrap().display().to_string()),
        "{out}"
    );
    assert!(out.ends_with("[exit code 0]"), "{out}");
    let err = ws.err("bash", json!({"command": "echo failing; exit 3"})).await;
    assert!(err.contains("failing") && err.contains("[exit code 3]"), "{err}");
}

#[tokio::test]
async fn bash_merges_stdout_and_stderr_in_order() {
    let ws = workspace();
    let out = ws.ok("bash", json!({"command": "echo one; echo two >&2; echo three"})).await;
    assert!(out.starts_with("one\ntwo\nthree\n"), "{out}");
}

#[tokio::test]
async fn bash_timeout_kills_the_whole_process_group() {
    let ws = workspace();
    let started = Instant::now();
    let command = "sleep 100 & echo $!; sleep 100 & echo $!; sleep 100";
    let out = ws.err("bash", json!({"command": command, "timeout": 1000})).await;
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(out.contains("timed out after 1 s") && out.contains("killed"), "{out}");
    let children = pids(&out);
    assert_eq!(children.len(), 2, "{out}");
    for pid in children {
        assert!(gone(pid).await, "background child {pid} survived the timeout");
    }
}

#[tokio::test]
async fn cancelling_kills_the_whole_process_group() {
    let ws = workspace();
    let cancel = ws.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let out = ws.err("bash", json!({"command": "sleep 100 & echo $!; sleep 100"})).await;
    assert!(out.contains("cancelled by the user"), "{out}");
    for pid in pids(&out) {
        assert!(gone(pid).await, "child {pid} survived the cancel");
    }
}

#[tokio::test]
async fn bash_does_not_block_the_runtime_while_a_command_is_silent() {
    let ws = workspace();
    let ticks = tokio::spawn(async {
        let mut n = 0;
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            n += 1;
        }
        n
    });
    ws.ok("bash", json!({"command": "sleep 1"})).await;
    assert_eq!(ticks.await.unwrap(), 5);
}

#[tokio::test]
async fn bash_cuts_long_output_keeping_head_and_tail() {
    let ws = workspace();
    let out = ws.ok("bash", json!({"command": "echo FIRST; seq 1 100000; echo LAST"})).await;
    assert!(out.starts_with("FIRST\n"), "{}", &out[..40]);
    assert!(out.contains("LAST\n[exit code 0]"), "{}", &out[out.len() - 60..]);
    assert!(out.contains("output cut:") && out.contains("bytes in all"), "no marker");
    assert!(out.chars().count() < 31_000);
}

#[tokio::test]
async fn bash_output_is_lossy_utf8() {
    let ws = workspace();
    let out = ws.ok("bash", json!({"command": "printf 'ok \\377 done'"})).await;
    assert!(out.starts_with("ok \u{FFFD} done"), "{out}");
}

#[tokio::test]
async fn bash_cd_persists_between_calls() {
    let ws = workspace();
    std::fs::create_dir(ws.path("sub")).unwrap();
    ws.ok("bash", json!({"command": "cd sub"})).await;
    let out = ws.ok("bash", json!({"command": "pwd"})).await;
    assert!(out.lines().next().is_some_and(|l| l.ends_with("/sub")), "{out}");
}

/// The permission gate judges `echo x > config` from the workspace; a shell
/// left in `.git` would make that `.git/config`.
#[tokio::test]
async fn redteam_bash_cd_into_git_is_not_kept_for_the_next_call() {
    let ws = workspace();
    ws.write(".git/hooks/pre-commit", "#!/bin/sh\n");
    for folder in [".git", ".git/hooks", ".agent"] {
        std::fs::create_dir_all(ws.path(folder)).unwrap();
        let out = ws.ok("bash", json!({"command": format!("cd {folder}")})).await;
        assert!(out.contains("holds files the agent may not write"), "{out}");
        let out = ws.ok("bash", json!({"command": "pwd"})).await;
        let root = std::fs::canonicalize(ws.dir.path()).unwrap();
        assert_eq!(out.lines().next(), Some(root.to_str().unwrap()), "{out}");
    }
}

#[tokio::test]
async fn bash_cd_outside_the_workspace_is_reset_with_a_note() {
    let ws = workspace();
    let out = ws.ok("bash", json!({"command": "cd /"})).await;
    assert!(out.contains("outside the workspace"), "{out}");
    let out = ws.ok("bash", json!({"command": "pwd"})).await;
    let root = std::fs::canonicalize(ws.dir.path()).unwrap();
    assert_eq!(out.lines().next(), Some(root.to_str().unwrap()), "{out}");
}

#[tokio::test]
async fn bash_refuses_catastrophic_commands_before_running() {
    let ws = workspace();
    let err = ws.err("bash", json!({"command": "touch ran.txt; rm -rf /"})).await;
    assert!(err.contains("refused before running") && err.contains("root folder"), "{err}");
    assert!(!ws.path("ran.txt").exists(), "nothing may run when refused");
}

#[tokio::test]
async fn bash_runs_near_misses_of_the_deny_list() {
    let ws = workspace();
    ws.write("build/x.o", "");
    ws.ok("bash", json!({"command": "rm -rf ./build"})).await;
    assert!(!ws.path("build").exists());
    let out = ws.ok("bash", json!({"command": "echo rm -rf /"})).await;
    assert!(out.starts_with("rm -rf /\n"), "{out}");
}

#[tokio::test]
async fn bash_clamps_an_excessive_timeout_and_refuses_empty_commands() {
    let ws = workspace();
    let out = ws
        .call_unvalidated("bash", json!({"command": "true", "timeout": 9_000_000}))
        .await
        .unwrap();
    assert!(out.joined_text().contains("over the maximum"), "{}", out.joined_text());
    let err = ws.call_unvalidated("bash", json!({"command": "  "})).await.unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    let err =
        ws.call_unvalidated("bash", json!({"command": "true", "timeout": 0})).await.unwrap_err();
    assert!(err.to_string().contains("`timeout`"), "{err}");
}

#[tokio::test]
async fn bash_returns_while_a_background_child_holds_the_output() {
    let ws = workspace();
    let started = Instant::now();
    let out = ws.ok("bash", json!({"command": "sleep 5 & echo started"})).await;
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert!(out.starts_with("started\n"), "{out}");
    assert!(out.contains("background processes are still running"), "{out}");
}

#[tokio::test]
async fn bash_cannot_write_outside_the_workspace_and_temp_when_landlock_is_available() {
    if ferroclaw_tools::landlock::abi_version().is_none() {
        eprintln!("SKIP: this kernel has no Landlock");
        return;
    }
    let Some(outside) = ferroclaw_testkit::scratch::dir_outside_temp() else {
        eprintln!("SKIP: no writable folder outside the temp folders");
        return;
    };
    let target = outside.path().join("escape.txt");
    let command = format!("echo inside > made.txt; echo out > {}", target.display());
    let mut ws = workspace();
    let out =
        ws.tools.get("bash").unwrap().execute(json!({"command": command}), &ws.ctx).await.unwrap();
    assert!(ws.path("made.txt").exists());
    assert!(!target.exists(), "the write outside was refused");
    assert!(out.joined_text().contains("Permission denied"), "{}", out.joined_text());

    ws.ctx.sandbox.confine_writes = false;
    ws.tools.get("bash").unwrap().execute(json!({"command": command}), &ws.ctx).await.unwrap();
    assert!(target.exists(), "with the sandbox off the same command writes");
}

/// A workspace with the files that configure git and the next session.
fn project_with_protected_files() -> crate::Ws {
    let ws = workspace();
    ws.write(".git/config", "[core]\n");
    ws.write(".git/hooks/pre-commit", "#!/bin/sh\n");
    ws.write(".mcp.json", "{}");
    ws.write(".agent/config.toml", "model = \"x\"\n");
    ws
}

/// True where commands get read-only protected files (Landlock and user
/// namespaces); else says why the test is skipped.
fn protected_mounts_here() -> bool {
    if ferroclaw_tools::landlock::abi_version().is_none() {
        eprintln!("SKIP: this kernel has no Landlock");
        return false;
    }
    if let Err(why) = ferroclaw_tools::protected_mounts::available() {
        eprintln!("SKIP: {why}");
        return false;
    }
    true
}

fn protected_files_unchanged(ws: &crate::Ws) {
    assert_eq!(ws.read(".git/config"), "[core]\n");
    assert_eq!(ws.read(".git/hooks/pre-commit"), "#!/bin/sh\n");
    assert_eq!(ws.read(".mcp.json"), "{}");
    assert_eq!(ws.read(".agent/config.toml"), "model = \"x\"\n");
    assert!(!ws.path(".git/hooks/post-checkout").exists(), "a new hook was created");
}

#[tokio::test]
async fn redteam_confine_bash_cannot_change_protected_files_in_a_writable_workspace() {
    if !protected_mounts_here() {
        return;
    }
    let ws = project_with_protected_files();
    // Spellings the permission gate may not see; the mounts hold whatever the spelling.
    let command = "echo x >> .git/config; echo x > .git/hooks/pre-commit; \
         echo x > .git/hooks/post-checkout; echo x >> .mcp.json; rm -f .agent/config.toml; \
         mv .mcp.json moved.json; mv .git git-moved; (cd .git && echo x >> config); \
         echo x >> /proc/$PPID/root$PWD/.git/config; \
         echo ordinary > made.txt && mkdir -p .git/refs/x && echo ok > .git/refs/x/y && echo wrote";
    let out = ws.call("bash", json!({ "command": command })).await.unwrap().joined_text();
    protected_files_unchanged(&ws);
    assert!(ws.path(".git").is_dir() && !ws.path("git-moved").exists(), ".git was renamed");
    assert!(!ws.path("moved.json").exists(), ".mcp.json was renamed");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(out.contains("wrote"), "ordinary writes (also inside .git) still work: {out}");
    assert_eq!(ws.read("made.txt"), "ordinary\n");
}

/// A repository inside the project (a vendored clone): the user's git runs
/// its hooks and config as much as the project's own.
#[tokio::test]
async fn redteam_confine_bash_cannot_change_a_nested_repositorys_git_config_or_hooks() {
    if !protected_mounts_here() {
        return;
    }
    let ws = workspace();
    ws.write("vendor/lib/.git/config", "[core]\n");
    ws.write("vendor/lib/.git/hooks/pre-commit", "#!/bin/sh\n");
    ws.write("tpl/hooks/post-checkout", "#!/bin/sh\ntouch /tmp/pwned\n");
    let command = "git -C vendor/lib init -q --template=../../tpl; \
         echo x >> vendor/lib/.git/config; echo x > vendor/lib/.git/hooks/post-checkout; \
         mv vendor/lib/.git vendor/lib/git-moved; mv vendor/lib vendor/lib2; \
         echo ok > vendor/lib/.git/index && echo wrote";
    let out = ws.call("bash", json!({ "command": command })).await.unwrap().joined_text();
    assert_eq!(ws.read("vendor/lib/.git/config"), "[core]\n", "{out}");
    assert_eq!(ws.read("vendor/lib/.git/hooks/pre-commit"), "#!/bin/sh\n");
    assert!(!ws.path("vendor/lib/.git/hooks/post-checkout").exists(), "a hook was planted: {out}");
    assert!(!ws.path("vendor/lib2").exists() && !ws.path("vendor/lib/git-moved").exists(), "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(out.contains("wrote"), "git's own files there stay writable: {out}");
}

#[tokio::test]
async fn redteam_confine_a_background_job_cannot_change_protected_files() {
    if ferroclaw_tools::landlock::abi_version().is_none()
        || ferroclaw_tools::protected_mounts::available().is_err()
    {
        eprintln!("SKIP: no Landlock or no user namespaces");
        return;
    }
    let ws = project_with_protected_files();
    let jobs = ferroclaw_tools::JobManager::new();
    let run = ferroclaw_tools::background_tools(&jobs)
        .into_iter()
        .find(|t| t.name() == "background_run")
        .unwrap();
    let command = "f=.git/config; echo x >> $f; echo x >> .mcp.json; echo done > job.txt";
    run.execute(json!({"command": command}), &ws.ctx).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), jobs.wait_finished())
        .await
        .expect("the job finishes");
    assert!(ws.path("job.txt").exists(), "the job ran");
    protected_files_unchanged(&ws);
}
