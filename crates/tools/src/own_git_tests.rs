use super::*;
use ferroclaw_testkit::hostile::{Canary, FIXTURES, hostile_repo};

/// `git status` as ferroclaw runs it in `dir`: its output, or why it refused.
fn status(dir: &Path) -> Result<String, GitRefused> {
    let repo = GitRepo::find(dir)?;
    let out = git(&repo, dir, &GitAccess::default(), &["status", "--porcelain"])
        .command()
        .stdin(std::process::Stdio::null())
        .output()
        .expect("git runs");
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[test]
fn no_hostile_repository_makes_ferroclaws_git_status_run_its_program() {
    for fixture in FIXTURES {
        let ws = tempfile::tempdir().unwrap();
        let canary = Canary::new();
        hostile_repo(ws.path(), fixture, &canary);
        let said = status(ws.path());
        if *fixture != "planted-commondir" {
            assert!(said.as_ref().is_ok_and(|s| s.contains("a.txt")), "{fixture}: {said:?}");
        }
        assert_eq!(canary.hits(ws.path()), Vec::<String>::new(), "{fixture}");
    }
}

#[test]
fn a_commondir_planted_in_a_main_repository_is_refused_by_name() {
    let ws = tempfile::tempdir().unwrap();
    let canary = Canary::new();
    hostile_repo(ws.path(), "planted-commondir", &canary);
    let err = GitRepo::find(&ws.path().join("sub-folder-that-does-not-exist")).unwrap_err();
    assert!(matches!(err, GitRefused::PlantedCommonDir(_)), "{err}");
    assert!(err.to_string().contains(".git/commondir"), "{err}");
}

#[test]
fn a_linked_worktree_is_found_with_its_common_folder() {
    let ws = tempfile::tempdir().unwrap();
    ferroclaw_testkit::git::init_repo(ws.path(), "a.txt", "one\n");
    let linked = ws.path().join(".agent/worktrees/x");
    let text = linked.display().to_string();
    ferroclaw_testkit::git::git(ws.path(), &["worktree", "add", "-q", "-b", "wt/x", &text]);
    let repo = GitRepo::find(&linked).unwrap();
    let main = std::fs::canonicalize(ws.path()).unwrap();
    assert_eq!(repo.top, std::fs::canonicalize(&linked).unwrap());
    assert_eq!(repo.common_dir, main.join(".git"));
    assert_eq!(repo.git_dir, main.join(".git/worktrees/x"));
    assert_eq!(status(&linked).unwrap(), "");
}

/// What a program git might run (one no setting of ours switched off)
/// could do: it runs under the same confinement as ferroclaw's git.
#[test]
fn a_program_git_runs_anyway_cannot_read_home_secrets_write_outside_or_connect() {
    if crate::landlock::abi_version().is_none() {
        eprintln!("SKIP: this kernel has no Landlock");
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    ferroclaw_testkit::git::init_repo(ws.path(), "a.txt", "one\n");
    let canary = Canary::new();
    let repo = GitRepo::find(ws.path()).unwrap();
    let confinement = confine(&repo.folders(), &repo.folders(), &repo.projects(), &[]);
    // A copy in the workspace, which git may read (the original is outside it).
    let script = ws.path().join("canary.sh");
    std::fs::copy(&canary.script, &script).unwrap();
    let out = Launch::new(&script, ws.path())
        .arg("escaped")
        .confined(confinement)
        .command()
        .stdin(std::process::Stdio::null())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let hits = canary.hits(ws.path());
    // It ran (it wrote the workspace, which git may write) but reached
    // nothing outside: no marker beside itself, nothing sent.
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].starts_with("wrote "), "{hits:?}");
    let read = Launch::new("cat", ws.path())
        .arg(&canary.secret)
        .confined(confine(&repo.folders(), &repo.folders(), &repo.projects(), &[]))
        .command()
        .output()
        .expect("runs");
    assert!(!String::from_utf8_lossy(&read.stdout).contains("CANARY"), "{read:?}");
}
