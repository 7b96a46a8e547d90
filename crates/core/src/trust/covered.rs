//! Which of a project's files trust covers: every file that grants
//! permissions, picks a model or provider, or names a command ferroclaw
//! runs. A change to any of them (a `git pull`, the agent's own edit) makes
//! the project untrusted until the user trusts it again.

use std::path::{Path, PathBuf};

use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_file};

/// Settings files: permission mode, rules, providers, MCP servers, hooks.
pub const PROJECT_FILES: &[&str] = &[
    ".agent/config.toml",
    ".agent/mcp.json",
    ".mcp.json",
    // Their hooks are commands (see `crate::hooks`), their permissions grant.
    ".claude/settings.json",
    ".claude/settings.local.json",
];

/// Folders every file of which is covered: custom commands (`allowed-tools`,
/// `model`), agent types (`model`, and they may take a built-in's name),
/// and the hook scripts settings files conventionally run.
pub const PROJECT_FOLDERS: &[&str] = &[
    ".agent/commands",
    ".claude/commands",
    ".agent/agents",
    ".claude/agents",
    ".agent/hooks",
    ".claude/hooks",
];

/// Skill folders: a skill there is covered when it carries `allowed-tools`
/// or files besides Markdown (scripts the model is told to run). Plain
/// instruction skills are not, so writing one (the learning loop does) does
/// not cost the project its trust.
pub const SKILL_FOLDERS: &[&str] = &[".agent/skills", ".claude/skills"];

/// Deepest folder level walked below a covered folder (commands nest
/// namespaces three deep; skills keep `scripts/` one level down).
const MAX_DEPTH: usize = 4;

/// Most files walked in one project; past it the count itself is hashed, so
/// adding files still changes the hash.
pub const MAX_COVERED_FILES: usize = 2_000;

/// The covered files that exist, relative to `workspace`, sorted.
pub fn covered_files(workspace: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = PROJECT_FILES
        .iter()
        .map(PathBuf::from)
        .filter(|rel| std::fs::metadata(workspace.join(rel)).is_ok())
        .collect();
    for folder in PROJECT_FOLDERS {
        walk(workspace, Path::new(folder), 0, &mut out);
    }
    for folder in SKILL_FOLDERS {
        let root = workspace.join(folder);
        for entry in read_sorted(&root) {
            let rel = Path::new(folder).join(&entry);
            let abs = workspace.join(&rel);
            if abs.is_dir() {
                let mut files = Vec::new();
                walk(workspace, &rel, 1, &mut files);
                if files.iter().any(|f| grants_or_runs(&workspace.join(f))) {
                    out.extend(files);
                }
            } else if grants_or_runs(&abs) {
                out.push(rel);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// True for a skill file that carries `allowed-tools`, or is not Markdown
/// (a script, a program, a data file a script reads).
fn grants_or_runs(path: &Path) -> bool {
    if path.extension().is_none_or(|x| x != "md") {
        return true;
    }
    read_repo_file(path, MAX_REPO_FILE_BYTES)
        .map(|bytes| String::from_utf8_lossy(&bytes).contains("allowed-tools"))
        .unwrap_or(true)
}

/// Every file below `workspace/rel`, relative to `workspace`.
fn walk(workspace: &Path, rel: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    for name in read_sorted(&workspace.join(rel)) {
        if out.len() >= MAX_COVERED_FILES {
            return;
        }
        let child = rel.join(name);
        if workspace.join(&child).is_dir() {
            if depth < MAX_DEPTH {
                walk(workspace, &child, depth + 1, out);
            }
        } else {
            out.push(child);
        }
    }
}

/// The names in a folder, sorted; none when it is missing or not a folder.
fn read_sorted(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<_> =
        std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.file_name()).collect();
    names.sort();
    names.truncate(MAX_COVERED_FILES);
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(ws: &Path, rel: &str, text: &str) {
        let p = ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn commands_agents_hook_scripts_and_granting_skills_are_covered_plain_skills_are_not() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path();
        write(ws, ".claude/commands/x.md", "---\nallowed-tools: Bash\n---\nrm it\n");
        write(ws, ".agent/commands/ns/y.md", "y\n");
        write(ws, ".agent/agents/explore.md", "---\nmodel: ollama/x\n---\nx\n");
        write(ws, ".claude/agents/rev.md", "r\n");
        write(ws, ".claude/hooks/guard.sh", "exit 0\n");
        write(ws, ".agent/skills/notes/SKILL.md", "---\nname: notes\n---\nplain\n");
        write(ws, ".agent/skills/deploy/SKILL.md", "---\nname: deploy\n---\nrun it\n");
        write(ws, ".agent/skills/deploy/scripts/go.sh", "rm -rf /\n");
        write(ws, ".claude/skills/git/SKILL.md", "---\nallowed-tools: Bash(git:*)\n---\n");
        let got: Vec<String> =
            covered_files(ws).iter().map(|p| p.to_string_lossy().into_owned()).collect();
        assert_eq!(
            got,
            [
                ".agent/agents/explore.md",
                ".agent/commands/ns/y.md",
                ".agent/skills/deploy/SKILL.md",
                ".agent/skills/deploy/scripts/go.sh",
                ".claude/agents/rev.md",
                ".claude/commands/x.md",
                ".claude/hooks/guard.sh",
                ".claude/skills/git/SKILL.md",
            ]
        );
    }
}
