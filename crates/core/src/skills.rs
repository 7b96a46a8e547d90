//! Skills: task instructions the model loads when it needs them (the Agent
//! Skills standard, agentskills.io, plus nanobot's and nanoAgent's extras).
//!
//! Where they come from, earlier roots overriding later ones by name:
//! `<project>/.agent/skills/`, `<project>/.claude/skills/`,
//! `$FERROCLAW_HOME/skills/`, then the built-ins compiled into the binary.
//! In a root, `NAME/SKILL.md` is a standard skill (its resource files sit
//! beside it); nanoAgent's single-file `NAME.md` and older `NAME.json` are
//! read too.
//!
//! Progressive disclosure: the system prompt lists every skill as one line
//! ([`SkillSet::summary`]) and carries `always` skills in full; the
//! `load_skill` tool ([`LoadSkillTool`]) returns a body on demand. A skill
//! whose requirements (binaries, environment variables, OS) are missing is
//! listed as unavailable with the reason; a malformed one is skipped with a
//! [`SkillProblem`] naming the file, never a crash.

mod builtin;
mod fields;
mod load_skill;
mod parse;
mod requirements;

use std::path::{Path, PathBuf};

pub use builtin::BUILTIN_SKILLS;
pub use load_skill::{LoadSkillTool, render_skill, resources as load_skill_resources};
pub use parse::{
    MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, check_name, parse_skill_md,
};
pub use requirements::Requirements;

/// Longest body of an `always` skill put into the system prompt, in
/// characters (the same cap as bootstrap files).
pub const MAX_ALWAYS_SKILL_CHARS: usize = 20_000;

/// Budget of the one-line skill list in the prompt, in characters: Claude
/// Code caps its skill listing the same way (8,000 characters when it does
/// not know the context window; `SLASH_COMMAND_TOOL_CHAR_BUDGET` sets it, for
/// both). The skills past it are counted in a closing line and still load
/// by name.
pub const SKILL_LIST_BUDGET_CHARS: usize = 8_000;

/// The list's budget: `SLASH_COMMAND_TOOL_CHAR_BUDGET`, else [`SKILL_LIST_BUDGET_CHARS`].
pub fn skill_list_budget() -> usize {
    std::env::var("SLASH_COMMAND_TOOL_CHAR_BUDGET")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(SKILL_LIST_BUDGET_CHARS)
}

/// Where a skill was found; decides which one wins when names collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkillSource {
    /// `<project>/.agent/skills/` or `<project>/.claude/skills/`.
    Project,
    /// `$FERROCLAW_HOME/skills/`.
    User,
    /// Compiled into the binary.
    Builtin,
}

impl std::fmt::Display for SkillSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Project => "project",
            Self::User => "user",
            Self::Builtin => "built-in",
        })
    }
}

/// One skill, parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// What `load_skill` is called with.
    pub name: String,
    /// What it does and when to use it: the line in the system prompt.
    pub description: String,
    /// The instructions (the Markdown after the frontmatter).
    pub body: String,
    pub source: SkillSource,
    /// The file it was read from; `builtin:NAME` for built-ins.
    pub path: PathBuf,
    /// The folder of a `NAME/SKILL.md` skill, holding its resource files.
    pub dir: Option<PathBuf>,
    /// Put the whole body into every system prompt.
    pub always: bool,
    /// nanoAgent's `when_to_use`.
    pub when_to_use: Option<String>,
    /// nanoAgent's `triggers`: words that suggest the skill.
    pub triggers: Vec<String>,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    /// `allowed-tools` (experimental in the standard; informational here).
    pub allowed_tools: Vec<String>,
    /// Binaries, environment variables and operating systems it needs.
    pub requires: Requirements,
    /// Why it cannot be used on this machine, when a requirement is missing.
    pub unavailable: Option<String>,
}

/// Something wrong with a skill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillProblem {
    /// The file concerned.
    pub path: PathBuf,
    pub message: String,
    /// True when the skill was skipped; false for a warning.
    pub fatal: bool,
}

impl std::fmt::Display for SkillProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.fatal { "error" } else { "warning" };
        write!(f, "{what}: {}: {}", self.path.display(), self.message)
    }
}

/// Every skill in force, sorted by name, and the problems met finding them.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    skills: Vec<Skill>,
    problems: Vec<SkillProblem>,
}

/// A folder of skills and what kind of source it is.
#[derive(Debug, Clone)]
pub struct SkillRoot {
    pub dir: PathBuf,
    pub source: SkillSource,
}

impl SkillSet {
    /// The roots searched for a project and an agent home, highest priority
    /// first: `.agent/skills`, `.claude/skills`, `$FERROCLAW_HOME/skills`.
    pub fn roots(workspace: &Path, home: &Path) -> Vec<SkillRoot> {
        vec![
            SkillRoot {
                dir: workspace.join(".agent").join("skills"),
                source: SkillSource::Project,
            },
            SkillRoot {
                dir: workspace.join(".claude").join("skills"),
                source: SkillSource::Project,
            },
            SkillRoot { dir: home.join("skills"), source: SkillSource::User },
        ]
    }

    /// Finds the skills of a project and an agent home, built-ins included.
    pub fn discover(workspace: &Path, home: &Path) -> SkillSet {
        Self::from_roots(&Self::roots(workspace, home), true)
    }

    /// Finds the skills in `roots` (earlier wins on a name clash), then the
    /// built-ins when `builtins` is true.
    pub fn from_roots(roots: &[SkillRoot], builtins: bool) -> SkillSet {
        let mut set = SkillSet::default();
        for root in roots {
            for found in parse::read_root(&root.dir, root.source) {
                match found {
                    Ok((skill, warnings)) => set.add(skill, warnings),
                    Err(problem) => set.problems.push(problem),
                }
            }
        }
        if builtins {
            for (name, text) in BUILTIN_SKILLS {
                match parse::parse_builtin(name, text) {
                    Ok((skill, warnings)) => set.add(skill, warnings),
                    Err(problem) => set.problems.push(problem),
                }
            }
        }
        set.skills.sort_by(|a, b| a.name.cmp(&b.name));
        set
    }

    /// Adds a skill (and the warnings about it) unless one of the same name
    /// came from a higher-priority place; a clash inside the same kind of
    /// source is worth a warning.
    fn add(&mut self, mut skill: Skill, warnings: Vec<SkillProblem>) {
        if let Some(existing) = self.skills.iter().find(|s| s.name == skill.name) {
            if existing.source == skill.source {
                self.problems.push(SkillProblem {
                    path: skill.path.clone(),
                    message: format!(
                        "skill {:?} is also defined in {}, which wins",
                        skill.name,
                        existing.path.display()
                    ),
                    fatal: false,
                });
            }
            return;
        }
        skill.unavailable = skill.requires.missing();
        self.problems.extend(warnings);
        self.skills.push(skill);
    }

    /// The skills, sorted by name.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// Problems met: skipped files (fatal) and warnings.
    pub fn problems(&self) -> &[SkillProblem] {
        &self.problems
    }

    /// True when some skill file was skipped.
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(|p| p.fatal)
    }

    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Names of every skill, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.skills.iter().map(|s| s.name.as_str()).collect()
    }

    /// The system-prompt layer: `always` skills in full, then one line per
    /// other skill (`name: description`, unavailable ones with the reason).
    /// Empty when there are no skills.
    pub fn prompt_layer(&self) -> String {
        let mut out = String::new();
        for skill in self.skills.iter().filter(|s| s.always && s.unavailable.is_none()) {
            out.push_str(&format!(
                "# Skill: {}\n\n{}\n\n",
                skill.name,
                crate::context::cap(skill.body.trim(), MAX_ALWAYS_SKILL_CHARS)
            ));
        }
        let summary = self.summary();
        if !summary.is_empty() {
            out.push_str(&summary);
        }
        out.trim_end().to_string()
    }

    /// The one-line-per-skill list, under a heading that tells the model how
    /// to load one, within [`skill_list_budget`]; a last line counts the
    /// skills that did not fit. Skills already included in full are left out.
    pub fn summary(&self) -> String {
        self.summary_within(skill_list_budget())
    }

    /// [`summary`](Self::summary) within `budget` characters of lines.
    pub fn summary_within(&self, budget: usize) -> String {
        let listed: Vec<&Skill> =
            self.skills.iter().filter(|s| !(s.always && s.unavailable.is_none())).collect();
        if listed.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "# Skills\n\nSkills hold instructions for specific tasks. When a task matches one, \
             call load_skill(name) and follow what it says before starting.\n\n",
        );
        let mut used = 0;
        let mut left_out = 0;
        for skill in listed {
            let line = summary_line(skill);
            if left_out > 0 || used + line.len() + 1 > budget {
                left_out += 1;
                continue;
            }
            used += line.len() + 1;
            out.push_str(&line);
            out.push('\n');
        }
        if left_out > 0 {
            out.push_str(&format!(
                "({left_out} more skills not listed: the list is capped at {budget} characters; \
                 load_skill loads any skill by name)\n"
            ));
        }
        out
    }

    /// A line for `ferroclaw context` when the prompt's list left skills out.
    pub fn left_out_note(&self) -> Option<String> {
        let summary = self.summary();
        let line = summary.lines().last()?;
        let count = line.strip_prefix('(')?.split_once(" more skills not listed")?.0;
        Some(format!(
            "skills: {count} left out of the prompt's list (SLASH_COMMAND_TOOL_CHAR_BUDGET, \
             {} characters)",
            skill_list_budget()
        ))
    }
}

/// `- name: description`, with nanoAgent's `when_to_use` and the reason a
/// skill is unavailable.
fn summary_line(skill: &Skill) -> String {
    let mut line = format!("- {}: {}", skill.name, one_line(&skill.description));
    if let Some(when) = &skill.when_to_use
        && when.trim() != skill.description.trim()
    {
        line.push_str(&format!(" (use when: {})", one_line(when)));
    }
    if let Some(reason) = &skill.unavailable {
        line.push_str(&format!(" (unavailable: {reason})"));
    }
    line
}

/// Collapses whitespace runs (newlines included) into single spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn project_root(dir: &Path) -> Vec<SkillRoot> {
        vec![SkillRoot { dir: dir.to_path_buf(), source: SkillSource::Project }]
    }

    #[test]
    fn project_skills_override_user_skills_which_override_builtins() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".agent/skills/summarize/SKILL.md",
            "---\nname: summarize\ndescription: project version\n---\nP",
        );
        write(
            home.path(),
            "skills/summarize/SKILL.md",
            "---\nname: summarize\ndescription: user version\n---\nU",
        );
        write(
            home.path(),
            "skills/github/SKILL.md",
            "---\nname: github\ndescription: user github\n---\nG",
        );
        let set = SkillSet::discover(ws.path(), home.path());
        assert_eq!(set.get("summarize").unwrap().description, "project version");
        assert_eq!(set.get("github").unwrap().source, SkillSource::User);
        assert_eq!(set.get("skill-creator").unwrap().source, SkillSource::Builtin);
        assert!(!set.has_errors(), "{:?}", set.problems());
    }

    #[test]
    fn the_summary_lists_each_skill_on_one_line_with_unavailable_reasons() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "deploy/SKILL.md",
            "---\nname: deploy\ndescription: Ship it.\n  Carefully.\nmetadata:\n  requires:\n    bins: [ferroclaw-no-such-binary]\n---\nsteps",
        );
        write(
            dir.path(),
            "style/SKILL.md",
            "---\nname: style\ndescription: House style.\nalways: true\n---\nUse tabs.",
        );
        let set = SkillSet::from_roots(&project_root(dir.path()), false);
        let layer = set.prompt_layer();
        assert!(layer.starts_with("# Skill: style\n\nUse tabs."), "{layer}");
        assert!(
            layer.contains(
                "- deploy: Ship it. Carefully. (unavailable: needs `ferroclaw-no-such-binary` on PATH)"
            ),
            "{layer}"
        );
        assert!(!layer.contains("- style:"), "always skills are not listed twice");
    }

    #[test]
    fn a_malformed_skill_is_skipped_with_a_problem_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "broken/SKILL.md", "---\nname: [oops\n---\n");
        write(dir.path(), "good/SKILL.md", "---\nname: good\ndescription: fine\n---\n");
        let set = SkillSet::from_roots(&project_root(dir.path()), false);
        assert_eq!(set.names(), ["good"]);
        assert!(set.has_errors());
        let problem = &set.problems()[0];
        assert!(problem.path.ends_with("broken/SKILL.md"), "{problem}");
        assert!(problem.message.contains("YAML"), "{problem}");
    }

    #[test]
    fn every_builtin_skill_is_valid() {
        let set = SkillSet::from_roots(&[], true);
        assert!(set.problems().is_empty(), "{:?}", set.problems());
        assert_eq!(set.names(), ["github", "skill-creator", "summarize"]);
    }
}
