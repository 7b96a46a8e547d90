//! The agent workspace's starting files, written by `ferroclaw init`. Their
//! guidance is in HTML comments, which the prompt builder drops: an untouched
//! template costs no tokens.

use std::io::Write;
use std::path::{Path, PathBuf};

/// `(file name, text)` of each bootstrap template.
pub const WORKSPACE_TEMPLATES: &[(&str, &str)] = &[
    (
        "AGENTS.md",
        "<!-- Standing instructions for ferroclaw in every project and chat: how to work,\n\
         what to always or never do. Project-specific instructions belong in the project's\n\
         own AGENTS.md. Example:\n\
         - Run the tests before saying a change is done.\n\
         - Never push to main; open a pull request. -->\n",
    ),
    (
        "SOUL.md",
        "# Soul\n\n\
         - Direct and concise; no filler, no flattery.\n\
         - Honest about uncertainty; ask when a request is ambiguous.\n\
         <!-- Personality, tone and values. Edit freely. -->\n",
    ),
    (
        "USER.md",
        "<!-- Who the user is (name, timezone, languages, preferences). The agent keeps\n\
         this file up to date with its memory tool (target \"user\"). -->\n",
    ),
    (
        "TOOLS.md",
        "<!-- Notes about this machine's tools: which python or node to use, local\n\
         services and their ports, CLIs that are installed and how they are configured. -->\n",
    ),
    (
        "IDENTITY.md",
        "<!-- The agent's name, role and emoji, if you want to give it one. Example:\n\
         Name: Ferris. Role: pair programmer for the infra team. -->\n",
    ),
];

/// Creates `$FERROCLAW_HOME/workspace/` with the templates that do not exist
/// yet (never overwriting) and its `memory/` folder; returns the files written.
pub fn write_workspace_templates(home: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = crate::memory::workspace_dir(home);
    std::fs::create_dir_all(dir.join("memory"))?;
    let mut written = Vec::new();
    for (name, text) in WORKSPACE_TEMPLATES {
        let path = dir.join(name);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut file) => {
                file.write_all(text.as_bytes())?;
                written.push(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_written_once_and_never_overwrite() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("SOUL.md"), "mine").unwrap();
        let written = write_workspace_templates(home.path()).unwrap();
        assert_eq!(written.len(), 4);
        assert_eq!(std::fs::read_to_string(ws.join("SOUL.md")).unwrap(), "mine");
        assert!(ws.join("memory").is_dir());
        assert!(write_workspace_templates(home.path()).unwrap().is_empty());
    }

    #[test]
    fn untouched_templates_cost_almost_nothing_in_the_prompt() {
        let home = tempfile::tempdir().unwrap();
        write_workspace_templates(home.path()).unwrap();
        let ctx = crate::context::ContextBuilder::new(home.path(), home.path())
            .without_builtin_skills()
            .build();
        let layer = ctx.layer("workspace").unwrap();
        assert!(layer.text.contains("## SOUL.md"), "{}", layer.text);
        assert!(!layer.text.contains("USER.md"), "comment-only files are left out");
        assert!(layer.tokens() < 100, "{}", layer.tokens());
    }
}
