//! The shadow store: a bare git repository under
//! `$FERROCLAW_HOME/checkpoints/<project>/` that snapshots the workspace
//! with the workspace as its work tree and one index per session. The
//! user's own repository is never read or written: git runs with our
//! `GIT_DIR`, a cleared environment (no global or system config, so no
//! filters, hooks or fsmonitor defined there), hooks and fsmonitor off, and
//! `info/attributes` unsetting every attribute that runs a program or
//! rewrites bytes (`filter`, `text`, `eol`, `ident`,
//! `working-tree-encoding`), which outranks a hostile `.gitattributes`.
//! Blocking: call it from `spawn_blocking`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::CheckpointError;

/// Attributes that would run a program or change bytes between the
/// workspace and the store, unset for every path. `$GIT_DIR/info/attributes`
/// has the highest precedence of all attribute files.
const NEUTRAL_ATTRIBUTES: &str =
    "* -text -eol -filter -ident -working-tree-encoding -diff -merge -export-subst\n";

/// Who the checkpoint commits are by (git needs a name to make a commit).
const AUTHOR: &str = "ferroclaw";

/// A snapshot of the workspace: the tree, and what was left out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub tree: String,
    /// Files not captured, each with why (`big.bin (12 MB, over the 10 MB cap)`).
    pub skipped: Vec<String>,
}

/// How much a snapshot takes in.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Files larger than this are left out (and never touched by a restore).
    pub max_file_bytes: u64,
    /// More new or changed files than this and no snapshot is taken.
    pub max_files: usize,
}

/// One project's shadow repository, used for one session.
#[derive(Debug, Clone)]
pub struct ShadowRepo {
    /// `$FERROCLAW_HOME`, kept out of snapshots when inside the workspace.
    home: PathBuf,
    git_dir: PathBuf,
    work_tree: PathBuf,
    index: PathBuf,
}

/// The folder name of a path: its characters, separators as `-` (the
/// same scheme as the session store's project folders).
pub fn path_key(path: &Path) -> String {
    path.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '-' })
        .collect()
}

/// A session id as one ref name component.
pub(super) fn ref_component(session: &str) -> String {
    let key: String = session
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
        .collect();
    if key.is_empty() { "-".into() } else { key }
}

impl ShadowRepo {
    /// The store of `workspace` under `home`, for `session`; created on
    /// first use.
    pub fn open(home: &Path, workspace: &Path, session: &str) -> Result<Self, CheckpointError> {
        let repo = ShadowRepo::at(home, workspace, session);
        repo.prepare()?;
        Ok(repo)
    }

    /// The store of `workspace` under `home`, for `session`, without touching
    /// the disk: [`prepare`](Self::prepare) it before its first use.
    pub fn at(home: &Path, workspace: &Path, session: &str) -> ShadowRepo {
        let git_dir = home.join("checkpoints").join(path_key(workspace));
        let index = git_dir.join("indexes").join(ref_component(session));
        ShadowRepo { home: home.to_path_buf(), git_dir, work_tree: workspace.to_path_buf(), index }
    }

    /// Creates the store if it does not exist yet (`git init`) and writes the
    /// settings that keep the user's repository and attributes out of it.
    pub fn prepare(&self) -> Result<(), CheckpointError> {
        let repo = self;
        if !repo.git_dir.join("HEAD").is_file() {
            crate::private_files::create_dir_all(&repo.git_dir).map_err(|e| repo.io(e))?;
            let mut init = repo.git();
            init.env_remove("GIT_WORK_TREE").env_remove("GIT_INDEX_FILE");
            let out = init
                .args(["init", "--bare", "--quiet"])
                .output()
                .map_err(|source| CheckpointError::Spawn { source })?;
            if !out.status.success() {
                return Err(CheckpointError::Git {
                    args: "init --bare".into(),
                    stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                });
            }
        }
        // Written every open: an older store, or one whose files were edited.
        let info = repo.git_dir.join("info");
        std::fs::create_dir_all(&info).map_err(|e| repo.io(e))?;
        std::fs::write(info.join("attributes"), NEUTRAL_ATTRIBUTES).map_err(|e| repo.io(e))?;
        let mut exclude = String::from("/.git\n");
        // A home inside the workspace must not snapshot itself.
        if let Ok(inner) = repo.home.strip_prefix(&repo.work_tree)
            && !inner.as_os_str().is_empty()
        {
            exclude.push_str(&format!("/{}/\n", inner.to_string_lossy().replace('\\', "/")));
        }
        std::fs::write(info.join("exclude"), exclude).map_err(|e| repo.io(e))?;
        std::fs::create_dir_all(repo.git_dir.join("indexes")).map_err(|e| repo.io(e))?;
        Ok(())
    }

    /// The same store, used for another session (its own index).
    pub fn with_session(&self, session: &str) -> ShadowRepo {
        ShadowRepo {
            home: self.home.clone(),
            git_dir: self.git_dir.clone(),
            work_tree: self.work_tree.clone(),
            index: self.git_dir.join("indexes").join(ref_component(session)),
        }
    }

    /// The repository's folder.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    fn io(&self, source: std::io::Error) -> CheckpointError {
        CheckpointError::Io { path: self.git_dir.clone(), source }
    }

    /// `git` confined to the shadow store: nothing inherited from the
    /// environment or the user's config, nothing from the workspace's
    /// repository, no hooks, no fsmonitor, no automatic gc; started through
    /// the one launcher ([`ferroclaw_tools::process::Launch`]), writing only
    /// the store and the workspace (a restore writes files back), reading
    /// nothing else, without network.
    fn git(&self) -> Command {
        use ferroclaw_tools::own_git;
        use ferroclaw_tools::process::{EnvPolicy, Launch};
        let mut env = own_git::neutral_env();
        env.retain(|(k, _)| k != "HOME");
        for (name, value) in [
            ("HOME", self.git_dir.as_os_str()),
            ("GIT_DIR", self.git_dir.as_os_str()),
            ("GIT_WORK_TREE", self.work_tree.as_os_str()),
            ("GIT_INDEX_FILE", self.index.as_os_str()),
            ("GIT_AUTHOR_NAME", AUTHOR.as_ref()),
            ("GIT_AUTHOR_EMAIL", "checkpoints@ferroclaw".as_ref()),
            ("GIT_COMMITTER_NAME", AUTHOR.as_ref()),
            ("GIT_COMMITTER_EMAIL", "checkpoints@ferroclaw".as_ref()),
        ] {
            env.push((name.into(), value.to_os_string()));
        }
        // Ferroclaw's own checkpoints are the only writer of the store; the
        // workspace is written back by a restore.
        env.retain(|(k, _)| k != "GIT_OPTIONAL_LOCKS");
        let folders = [self.git_dir.clone(), self.work_tree.clone()];
        let confinement =
            own_git::confine(&folders, &folders, std::slice::from_ref(&self.work_tree), &[]);
        let cwd = if self.work_tree.is_dir() { &self.work_tree } else { &self.git_dir };
        let mut cmd = Launch::new("git", cwd)
            .env_policy(EnvPolicy::Exact(env))
            .args(own_git::neutral_args())
            .args([
                "-c",
                "core.autocrlf=false",
                "-c",
                "core.safecrlf=false",
                "-c",
                "core.symlinks=true",
                "-c",
                "advice.addEmbeddedRepo=false",
                "-c",
                "core.quotePath=false",
            ])
            .confined(confinement)
            .command();
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    /// Runs git with `args` (and `input` on stdin); its stdout, or an error
    /// with its stderr.
    pub(super) fn run(
        &self,
        args: &[&str],
        input: Option<&[u8]>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let (ok, out, err) = self.run_status(args, input)?;
        if ok { Ok(out) } else { Err(CheckpointError::Git { args: args.join(" "), stderr: err }) }
    }

    fn run_status(
        &self,
        args: &[&str],
        input: Option<&[u8]>,
    ) -> Result<(bool, Vec<u8>, String), CheckpointError> {
        let mut cmd = self.git();
        cmd.args(args);
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().map_err(|source| CheckpointError::Spawn { source })?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(input).map_err(|e| self.io(e))?;
        }
        let out = child.wait_with_output().map_err(|e| self.io(e))?;
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Ok((out.status.success(), out.stdout, err))
    }

    /// The workspace folder.
    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    /// [`snapshot`](Self::snapshot) with `force` (paths relative to the
    /// workspace) staged too, gitignored or not: the files ferroclaw's own
    /// tools are about to change or have changed, so that a rewind can
    /// bring them back. Once staged they stay in this session's snapshots.
    pub fn snapshot_with(
        &self,
        limits: Limits,
        force: &[PathBuf],
    ) -> Result<Snapshot, CheckpointError> {
        // A file over the cap is left out even when a tool names it (the
        // file tools refuse it anyway): staging it would have git read and
        // compress all of it, a GB of sparse file included.
        let within_cap = |md: std::fs::Metadata| !md.is_file() || md.len() <= limits.max_file_bytes;
        let existing: Vec<&PathBuf> = force
            .iter()
            .filter(|rel| self.work_tree.join(rel).symlink_metadata().is_ok_and(within_cap))
            .collect();
        if !existing.is_empty() {
            let mut pathspec = Vec::new();
            for rel in existing {
                pathspec.extend_from_slice(b":(top,literal)");
                pathspec.extend_from_slice(rel.as_os_str().as_encoded_bytes());
                pathspec.push(0);
            }
            let args =
                ["add", "-f", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"];
            let (ok, _, err) = self.run_status(&args, Some(&pathspec))?;
            if !ok {
                tracing::info!("checkpoint: staging the files ferroclaw changes: {err}");
            }
        }
        self.snapshot(limits)
    }

    /// Stages the workspace as it is now (ignored files and files over the
    /// cap left out) and writes it as a tree. Cheap when little changed: git's
    /// index keeps each file's stat data, so only changed files are read.
    pub fn snapshot(&self, limits: Limits) -> Result<Snapshot, CheckpointError> {
        let listed =
            self.run(&["ls-files", "-z", "--others", "--modified", "--exclude-standard"], None)?;
        let candidates: Vec<&[u8]> = listed.split(|b| *b == 0).filter(|p| !p.is_empty()).collect();
        if candidates.len() > limits.max_files {
            return Err(CheckpointError::TooManyFiles {
                count: candidates.len(),
                max: limits.max_files,
            });
        }
        let mut skipped = Vec::new();
        let mut pathspec = Vec::new();
        for raw in &candidates {
            let rel = String::from_utf8_lossy(raw);
            let Ok(md) = std::fs::symlink_metadata(self.work_tree.join(&*rel)) else { continue };
            if md.is_file() && md.len() > limits.max_file_bytes {
                skipped.push(format!(
                    "{rel} ({}, over the {} cap)",
                    human_bytes(md.len()),
                    human_bytes(limits.max_file_bytes)
                ));
                pathspec.extend_from_slice(b":(top,literal)");
                pathspec.extend_from_slice(raw);
                pathspec.push(0);
            }
        }
        if !pathspec.is_empty() {
            // Out of the index, so a restore neither captures nor deletes them.
            self.run(
                &[
                    "rm",
                    "--cached",
                    "-q",
                    "--ignore-unmatch",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(&pathspec),
            )?;
            let mut add = b":(top)\0".to_vec();
            for spec in pathspec.split(|b| *b == 0).filter(|s| !s.is_empty()) {
                add.extend_from_slice(b":(exclude,top,literal)");
                add.extend_from_slice(&spec[b":(top,literal)".len()..]);
                add.push(0);
            }
            self.add(Some(&add), &mut skipped)?;
        } else if !candidates.is_empty() || !self.index.is_file() {
            self.add(None, &mut skipped)?;
        }
        let tree = String::from_utf8_lossy(&self.run(&["write-tree"], None)?).trim().to_string();
        Ok(Snapshot { tree, skipped })
    }

    /// `git add -A`, over `pathspec` when given; unreadable files are
    /// skipped with git's note rather than failing the snapshot.
    fn add(
        &self,
        pathspec: Option<&[u8]>,
        skipped: &mut Vec<String>,
    ) -> Result<(), CheckpointError> {
        let mut args = vec!["add", "-A", "--ignore-errors"];
        if pathspec.is_some() {
            args.extend(["--pathspec-from-file=-", "--pathspec-file-nul"]);
        }
        let (ok, _, err) = self.run_status(&args, pathspec)?;
        if !ok {
            let notes: Vec<String> = err
                .lines()
                .filter(|l| l.starts_with("error:") || l.starts_with("warning:"))
                .map(ToString::to_string)
                .collect();
            if notes.is_empty() {
                return Err(CheckpointError::Git { args: args.join(" "), stderr: err });
            }
            skipped.extend(notes);
        }
        Ok(())
    }

    /// Records `tree` as a commit kept under the session's ref; its id.
    pub fn commit(
        &self,
        session: &str,
        tree: &str,
        message: &str,
    ) -> Result<String, CheckpointError> {
        let commit = self.run(&["commit-tree", tree, "-m", message], None)?;
        let commit = String::from_utf8_lossy(&commit).trim().to_string();
        let name = format!("refs/checkpoints/{}/{commit}", ref_component(session));
        self.run(&["update-ref", &name, &commit], None)?;
        Ok(commit)
    }

    /// The tree of a commit.
    pub fn tree_of(&self, commit: &str) -> Result<String, CheckpointError> {
        let out =
            self.run(&["rev-parse", "--verify", "--quiet", &format!("{commit}^{{tree}}")], None)?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    /// The checkpoint commits still kept for `session`.
    pub fn kept(&self, session: &str) -> Result<Vec<String>, CheckpointError> {
        let prefix = format!("refs/checkpoints/{}/", ref_component(session));
        let out = self.run(&["for-each-ref", "--format=%(objectname)", &prefix], None)?;
        Ok(String::from_utf8_lossy(&out).lines().map(str::to_string).collect())
    }

    /// Files that differ between two trees, as `M path`, `A path`, `D path`.
    pub fn changed(&self, from: &str, to: &str) -> Result<Vec<String>, CheckpointError> {
        if from == to {
            return Ok(Vec::new());
        }
        let out =
            self.run(&["diff-tree", "-r", "-z", "--no-renames", "--name-status", from, to], None)?;
        let fields: Vec<String> = out
            .split(|b| *b == 0)
            .filter(|f| !f.is_empty())
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        Ok(fields.chunks(2).map(|c| c.join(" ")).collect())
    }

    /// Makes the workspace match `tree`: files in it are written back, files
    /// the last snapshot captured that it lacks are deleted; ignored files
    /// and files over the size cap are left alone. Call right after
    /// [`snapshot`](Self::snapshot), whose index says what exists now.
    pub fn restore(&self, tree: &str) -> Result<(), CheckpointError> {
        self.run(&["read-tree", "--reset", "-u", tree], None)?;
        Ok(())
    }

    /// Drops checkpoints beyond the newest `keep` of each session and those
    /// older than `max_age_secs`, then the objects only they held (loose
    /// objects younger than an hour stay: another session may be writing).
    pub fn prune(
        &self,
        keep: usize,
        max_age_secs: u64,
        now: u64,
    ) -> Result<usize, CheckpointError> {
        let out = self.run(
            &["for-each-ref", "--format=%(refname) %(committerdate:unix)", "refs/checkpoints/"],
            None,
        )?;
        let mut by_session: std::collections::BTreeMap<String, Vec<(u64, String)>> =
            Default::default();
        for line in String::from_utf8_lossy(&out).lines() {
            let Some((name, date)) = line.rsplit_once(' ') else { continue };
            let session = name.split('/').nth(2).unwrap_or_default().to_string();
            by_session.entry(session).or_default().push((date.parse().unwrap_or(0), name.into()));
        }
        let mut delete = String::new();
        let mut count = 0;
        for refs in by_session.values_mut() {
            refs.sort_by_key(|r| std::cmp::Reverse(r.0));
            for (i, (date, name)) in refs.iter().enumerate() {
                if i >= keep || now.saturating_sub(*date) > max_age_secs {
                    delete.push_str(&format!("delete {name}\n"));
                    count += 1;
                }
            }
        }
        if count > 0 {
            self.run(&["update-ref", "--stdin"], Some(delete.as_bytes()))?;
            self.run(&["prune", "--expire=1.hour.ago"], None)?;
        }
        // Indexes of sessions gone quiet for that long are rebuilt if needed.
        for entry in std::fs::read_dir(self.git_dir.join("indexes")).into_iter().flatten().flatten()
        {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() > max_age_secs);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(count)
    }
}

fn human_bytes(n: u64) -> String {
    const MB: u64 = 1024 * 1024;
    if n >= MB {
        format!("{:.0} MB", n as f64 / MB as f64)
    } else {
        format!("{} KB", n.div_ceil(1024))
    }
}
