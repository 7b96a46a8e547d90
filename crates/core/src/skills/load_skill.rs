//! The `load_skill` tool: the second layer of progressive disclosure. The
//! system prompt lists skills by name; this returns one skill's body and the
//! list of its resource files, or one resource file's text.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Skill, SkillSet};

/// Most resource files listed for one skill.
pub(super) const MAX_LISTED_RESOURCES: usize = 100;
/// Longest resource file returned, in characters (about 25k tokens).
pub(super) const MAX_RESOURCE_CHARS: usize = 100_000;

/// `load_skill`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadSkillArgs {
    name: String,
    /// A resource file, relative to the skill's folder.
    file: Option<String>,
}

/// `load_skill(name, file?)`.
pub struct LoadSkillTool {
    skills: Arc<SkillSet>,
}

impl LoadSkillTool {
    /// A tool serving the given skills.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        Self { skills }
    }
}

#[async_trait]
impl Tool for LoadSkillTool {
    fn name(&self) -> &str {
        "load_skill"
    }

    fn description(&self) -> &str {
        "Loads a skill listed in the system prompt: its instructions, as <skill \
         name=\"NAME\">...</skill>, and the list of its resource files; with `file`, that \
         resource file instead. Follow the instructions."
    }

    fn input_schema(&self) -> Value {
        schema_for::<LoadSkillArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let LoadSkillArgs { name, file } = parse(input)?;
        let name = name.as_str();
        let Some(skill) = self.skills.get(name) else {
            let names = self.skills.names();
            return Ok(ToolOutput::error(format!(
                "unknown skill {name:?}; available skills: {}",
                if names.is_empty() { "(none)".to_string() } else { names.join(", ") }
            )));
        };
        match file.as_deref() {
            Some(file) => resource(skill, file),
            None => Ok(ToolOutput::text(render_skill(skill))),
        }
    }
}

/// `<skill name="...">body</skill>`, a note when unavailable, and the
/// resource files.
pub fn render_skill(skill: &Skill) -> String {
    let mut out = format!("<skill name=\"{}\">\n{}\n</skill>", skill.name, skill.body.trim());
    if let Some(reason) = &skill.unavailable {
        out.push_str(&format!(
            "\n\nNote: this skill is unavailable on this machine ({reason}); tell the user what is missing before relying on it."
        ));
    }
    if let Some(dir) = &skill.dir {
        let files = resources(dir);
        if !files.is_empty() {
            out.push_str(&format!(
                "\n\nSkill folder: {}\nResource files (read one with load_skill(name=\"{}\", file=PATH); run scripts from the skill folder with bash):\n",
                dir.display(),
                skill.name
            ));
            for f in &files {
                out.push_str(&format!("- {}\n", f.display()));
            }
            if files.len() == MAX_LISTED_RESOURCES {
                out.push_str(&format!("(only the first {MAX_LISTED_RESOURCES} are listed)\n"));
            }
        }
    }
    out
}

/// The files of a skill folder besides SKILL.md, relative, sorted; hidden
/// files and folders left out.
pub fn resources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(path),
                Ok(_) => {
                    if let Ok(rel) = path.strip_prefix(dir)
                        && rel != Path::new("SKILL.md")
                    {
                        out.push(rel.to_path_buf());
                    }
                }
                Err(_) => {}
            }
        }
    }
    out.sort();
    out.truncate(MAX_LISTED_RESOURCES);
    out
}

/// One resource file's text; refuses paths that leave the skill folder.
fn resource(skill: &Skill, file: &str) -> Result<ToolOutput, ToolError> {
    let Some(dir) = &skill.dir else {
        return Ok(ToolOutput::error(format!(
            "skill {:?} has no resource files (it is a single file)",
            skill.name
        )));
    };
    let rel = Path::new(file);
    if rel.is_absolute()
        || rel.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(ToolError::Refused(format!(
            "{file:?} is not a path inside the skill folder; use a path from the resource list"
        )));
    }
    let path = dir.join(rel);
    // SKILL.md files name their files in any case (`reference.md` for
    // `REFERENCE.md`): a missing path is looked up among the skill's files.
    let path = if path.exists() {
        path
    } else {
        let wanted = rel.to_string_lossy().to_lowercase();
        let mut same =
            resources(dir).into_iter().filter(|r| r.to_string_lossy().to_lowercase() == wanted);
        match (same.next(), same.next()) {
            (Some(only), None) => dir.join(only),
            _ => path,
        }
    };
    let inside = match (path.canonicalize(), dir.canonicalize()) {
        (Ok(p), Ok(d)) => p.starts_with(d),
        _ => false,
    };
    if !inside {
        let listed: Vec<String> = resources(dir).iter().map(|p| p.display().to_string()).collect();
        return Ok(ToolOutput::error(format!(
            "skill {:?} has no file {file:?}; its files: {}",
            skill.name,
            if listed.is_empty() { "(none)".into() } else { listed.join(", ") }
        )));
    }
    let max = ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES;
    let text = ferroclaw_tools::repo_file::read_repo_text(&path, max)
        .map_err(|e| ToolError::io(path.display().to_string(), e))?;
    Ok(ToolOutput::text(crate::context::cap(&text, MAX_RESOURCE_CHARS)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::{SkillRoot, SkillSource};
    use serde_json::json;

    fn fixture() -> (tempfile::TempDir, LoadSkillTool) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        std::fs::create_dir_all(root.join("pdf/scripts")).unwrap();
        std::fs::write(
            root.join("pdf/SKILL.md"),
            "---\nname: pdf\ndescription: PDFs\n---\nRun scripts/fill.py.",
        )
        .unwrap();
        std::fs::write(root.join("pdf/scripts/fill.py"), "print('fill')").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
        let set =
            SkillSet::from_roots(&[SkillRoot { dir: root, source: SkillSource::Project }], false);
        (dir, LoadSkillTool::new(Arc::new(set)))
    }

    async fn call(tool: &LoadSkillTool, input: Value) -> ToolOutput {
        match tool.execute(input, &ToolContext::new("/")).await {
            Ok(o) => o,
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }

    #[tokio::test]
    async fn loading_a_skill_returns_its_body_in_a_tag_and_its_resource_files() {
        let (_d, tool) = fixture();
        let out = call(&tool, json!({"name": "pdf"})).await;
        let text = out.joined_text();
        assert!(!out.is_error);
        assert!(text.starts_with("<skill name=\"pdf\">\nRun scripts/fill.py.\n</skill>"), "{text}");
        assert!(text.contains("- scripts/fill.py"), "{text}");
    }

    #[tokio::test]
    async fn an_unknown_skill_returns_the_available_names() {
        let (_d, tool) = fixture();
        let out = call(&tool, json!({"name": "pfd"})).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "unknown skill \"pfd\"; available skills: pdf");
    }

    #[tokio::test]
    async fn a_resource_file_is_returned_and_escapes_are_refused() {
        let (_d, tool) = fixture();
        let out = call(&tool, json!({"name": "pdf", "file": "scripts/fill.py"})).await;
        assert_eq!(out.joined_text(), "print('fill')");
        for bad in ["../../secret.txt", "/etc/passwd"] {
            let out = call(&tool, json!({"name": "pdf", "file": bad})).await;
            assert!(out.is_error, "{bad}");
            assert!(out.joined_text().contains("not a path inside"), "{}", out.joined_text());
        }
        let out = call(&tool, json!({"name": "pdf", "file": "nope.md"})).await;
        assert!(out.joined_text().contains("its files: scripts/fill.py"), "{}", out.joined_text());
    }

    #[tokio::test]
    async fn a_bundled_file_is_found_whatever_the_case_the_skill_md_wrote_it_in() {
        let (_d, tool) = fixture();
        let out = call(&tool, json!({"name": "pdf", "file": "Scripts/FILL.py"})).await;
        assert_eq!(out.joined_text(), "print('fill')");
    }
}
