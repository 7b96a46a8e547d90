//! Specifications of background jobs: the manager and its three tools.

use std::time::Duration;

use ferroclaw_tools::{
    JobManager, JobOptions, JobStatus, MAX_OUTPUT_CHARS, RESULT_KEEP_CHARS, ToolContext, ToolError,
    ToolRegistry, background_tools, format_results,
};
use serde_json::{Value, json};

#[path = "support/process.rs"]
mod process;
use process::{alive, gone};

/// Waits up to 5 s for a finished result.
async fn finished(jobs: &JobManager) {
    tokio::time::timeout(Duration::from_secs(5), jobs.wait_finished())
        .await
        .expect("a job should have finished within 5 s");
}

/// Waits up to 3 s for job `id`'s output to hold a number (a pid), and returns it.
async fn printed_pid(jobs: &JobManager, id: &str) -> i32 {
    for _ in 0..30 {
        let report = jobs.check(Some(id)).expect("known job");
        if let Some(pid) = report.lines().find_map(|l| l.trim().parse().ok()) {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("job {id} printed no pid");
}

fn opts(timeout_ms: u64) -> JobOptions {
    JobOptions {
        timeout: Some(Duration::from_millis(timeout_ms)),
        detached: false,
        confinement: None,
        env: None,
    }
}

fn registry(jobs: &JobManager) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    for tool in background_tools(jobs) {
        tools.register_arc(tool);
    }
    tools
}

/// Validates and runs tool `name` as the agent loop does.
async fn call(tools: &ToolRegistry, ctx: &ToolContext, name: &str, input: Value) -> String {
    tools.validate(name, &input).expect("valid arguments");
    let tool = tools.get(name).expect("registered");
    let out = tool.execute(input, ctx).await.expect("tool runs");
    assert!(!out.is_error, "{}", out.joined_text());
    out.joined_text()
}

#[tokio::test]
async fn a_finished_job_is_drained_exactly_once_while_other_work_happens() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let id = jobs.start("sleep 0.3; echo done", dir.path(), JobOptions::default()).unwrap();
    assert_eq!(id.len(), 8);
    assert!(jobs.drain_finished().is_empty(), "nothing finished yet");
    assert_eq!(jobs.running().len(), 1);

    finished(&jobs).await;
    let results = jobs.drain_finished();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!(
        (r.task_id.as_str(), r.status, r.exit_code),
        (id.as_str(), JobStatus::Completed, Some(0))
    );
    assert_eq!(r.command, "sleep 0.3; echo done");
    assert!(r.result.contains("done"), "{}", r.result);
    assert!(jobs.drain_finished().is_empty(), "a result is never repeated");
    assert!(jobs.running().is_empty());

    let block = format_results(&results);
    assert!(block.starts_with(&format!("<background-results>\n[bg:{id}] completed (exit code 0)")));
    assert!(block.contains("done"), "{block}");
}

#[tokio::test]
async fn results_of_several_jobs_are_neither_lost_nor_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let mut ids: Vec<String> = (0..5)
        .map(|i| {
            let cmd = format!("sleep 0.{i}; exit {i}");
            jobs.start(&cmd, dir.path(), JobOptions::default()).unwrap()
        })
        .collect();
    let mut seen = Vec::new();
    while seen.len() < 5 {
        finished(&jobs).await;
        seen.extend(jobs.drain_finished());
    }
    assert!(jobs.drain_finished().is_empty());
    let mut got: Vec<String> = seen.iter().map(|r| r.task_id.clone()).collect();
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    assert!(seen.iter().all(|r| r.status == JobStatus::Completed));
    let mut codes: Vec<i32> = seen.iter().filter_map(|r| r.exit_code).collect();
    codes.sort();
    assert_eq!(codes, [0, 1, 2, 3, 4]);
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let id = jobs.start("sleep 30 & echo $!; wait", dir.path(), opts(700)).unwrap();
    let child = printed_pid(&jobs, &id).await;
    finished(&jobs).await;
    let r = jobs.drain_finished().remove(0);
    assert_eq!(r.status, JobStatus::Timeout);
    assert_eq!(r.exit_code, None);
    assert!(r.result.contains("timed out"), "{}", r.result);
    assert!(gone(child).await, "the child sleep {child} survived the timeout");
}

#[tokio::test]
async fn kill_background_kills_the_job_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let tools = registry(&jobs);
    let ctx = ToolContext::new(dir.path());
    let started =
        call(&tools, &ctx, "background_run", json!({"command": "sleep 30 & echo $!; wait"})).await;
    let id = jobs.running()[0].id.clone();
    assert!(started.contains(&id), "{started}");
    let child = printed_pid(&jobs, &id).await;

    let killed = call(&tools, &ctx, "kill_background", json!({"id": id})).await;
    assert!(killed.contains("Killed background job"), "{killed}");
    assert!(gone(child).await, "the child sleep {child} survived the kill");
    assert_eq!(jobs.job(&id).unwrap().status, JobStatus::Killed);
    let results = jobs.drain_finished();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].status, JobStatus::Killed);

    let again = call(&tools, &ctx, "kill_background", json!({"id": id})).await;
    assert!(again.contains("already ended"), "{again}");
}

#[tokio::test]
async fn check_background_shows_status_exit_code_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let tools = registry(&jobs);
    assert!(tools.get("check_background").unwrap().read_only());
    assert!(!tools.get("background_run").unwrap().read_only());
    let ctx = ToolContext::new(dir.path());
    let id = jobs.start("echo partial; exit 3", dir.path(), JobOptions::default()).unwrap();
    finished(&jobs).await;
    let report = call(&tools, &ctx, "check_background", json!({"id": id})).await;
    assert!(report.starts_with(&format!("[{id}] completed (exit code 3) after ")), "{report}");
    assert!(report.contains("partial"), "{report}");
    let all = call(&tools, &ctx, "check_background", json!({})).await;
    assert!(all.contains(&format!("[{id}] completed")), "{all}");

    let err = tools
        .get("check_background")
        .unwrap()
        .execute(json!({"id": "nope"}), &ctx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&id), "the error lists known jobs: {err}");
}

#[tokio::test]
async fn output_is_bounded_in_memory_and_in_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let id = jobs
        .start(
            "echo FIRST; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo LAST",
            dir.path(),
            JobOptions::default(),
        )
        .unwrap();
    finished(&jobs).await;
    let report = jobs.check(Some(&id)).unwrap();
    assert!(report.chars().count() < MAX_OUTPUT_CHARS + 500, "check output is capped");
    assert!(report.contains("FIRST") && report.contains("LAST"));
    assert!(report.contains("bytes in all"), "the cut is marked");
    let r = jobs.drain_finished().remove(0);
    assert!(r.result.chars().count() < 2 * RESULT_KEEP_CHARS + 200);
    assert!(r.result.starts_with("FIRST") && r.result.trim_end().ends_with("LAST"));
}

#[tokio::test]
async fn dropping_the_manager_kills_jobs_that_are_not_detached() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let id = jobs.start("sleep 30 & echo $!; wait", dir.path(), JobOptions::default()).unwrap();
    let child = printed_pid(&jobs, &id).await;
    let clone = jobs.clone();
    drop(jobs);
    assert!(alive(child), "a live clone keeps the jobs");
    drop(clone);
    assert!(gone(child).await, "the child sleep {child} survived the manager");
}

#[tokio::test]
async fn shutdown_kills_running_jobs_and_records_them_killed() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let id = jobs.start("sleep 30", dir.path(), JobOptions::default()).unwrap();
    jobs.shutdown();
    finished(&jobs).await;
    assert_eq!(jobs.job(&id).unwrap().status, JobStatus::Killed);
}

#[tokio::test]
async fn a_detached_job_writes_a_log_and_outlives_the_manager() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let options = JobOptions { timeout: None, detached: true, confinement: None, env: None };
    let id = jobs.start("sleep 30 & echo $!; wait", dir.path(), options).unwrap();
    let child = printed_pid(&jobs, &id).await;
    let log = dir.path().join(format!(".agent/jobs/{id}.log"));
    assert_eq!(std::fs::read_to_string(&log).unwrap().trim(), child.to_string());
    drop(jobs);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let survived = alive(child);
    let _ = std::process::Command::new("kill").args(["-9", &child.to_string()]).status();
    assert!(survived, "a detached job survives its manager");
}

#[tokio::test]
async fn the_bash_deny_list_applies_to_background_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::new();
    let err = jobs.start("rm -rf /", dir.path(), JobOptions::default()).unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)), "{err}");
    assert!(err.to_string().contains("root folder"), "{err}");
    assert!(jobs.jobs().is_empty(), "nothing was started");
}

#[tokio::test]
async fn timeouts_over_the_maximum_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = JobManager::with_max_timeout(Duration::from_millis(500));
    let tools = registry(&jobs);
    let ctx = ToolContext::new(dir.path());
    let started =
        call(&tools, &ctx, "background_run", json!({"command": "sleep 30", "timeout": 3600})).await;
    assert!(started.contains("over the maximum"), "{started}");
    finished(&jobs).await;
    assert_eq!(jobs.drain_finished()[0].status, JobStatus::Timeout);
}
