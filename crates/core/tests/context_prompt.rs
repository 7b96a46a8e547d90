//! The assembled system prompt for a fixture project, pinned by snapshots:
//! bootstrap files, project instructions from the git root down, rules
//! (project overriding user), memory, skills (available, always, unavailable,
//! malformed, nanoAgent single-file) and a fixed runtime block.

use std::path::Path;

use ferroclaw_core::context::{GitState, Runtime};
use ferroclaw_core::{Context, ContextBuilder};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A home and a project (a git repository with the workspace in `app/`).
struct Fixture {
    home: tempfile::TempDir,
    repo: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let f = Fixture { home: tempfile::tempdir().unwrap(), repo: tempfile::tempdir().unwrap() };
        let home = f.home.path();
        write(
            home,
            "workspace/SOUL.md",
            "# Soul\n\n- Terse.\n<!-- guidance the model never sees -->\n",
        );
        write(home, "workspace/USER.md", "- Name: Ada\n- Timezone: Europe/Paris\n");
        write(home, "workspace/TOOLS.md", "<!-- only a comment: left out -->\n");
        write(home, "workspace/memory/MEMORY.md", "- The team deploys on Tuesdays\n");
        write(home, "rules/style.md", "User style: spaces.\n");
        write(home, "rules/commits.md", "Conventional commits.\n");
        write(
            home,
            "skills/notes/SKILL.md",
            "---\nname: notes\ndescription: Keep meeting notes in notes/.\n---\nWrite notes/DATE.md.\n",
        );
        let repo = f.repo.path();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        write(repo, "AGENTS.md", "Monorepo: run `make test` from the root.\n");
        let ws = repo.join("app");
        write(&ws, "CLAUDE.md", "The app is a CLI; keep startup under 10 ms.\n");
        write(
            &ws,
            ".agent/rules/style.md",
            "---\nglobs: \"*.rs\"\n---\nProject style: rustfmt defaults.\n",
        );
        write(&ws, ".agent/rules/testing.md", "Every bug fix comes with a test.\n");
        write(
            &ws,
            ".agent/skills/deploy/SKILL.md",
            "---\nname: deploy\ndescription: Deploy the app to staging.\nmetadata: '{\"nanobot\": {\"requires\": {\"bins\": [\"ferroclaw-test-no-such-deployer\"]}}}'\n---\nRun the deployer.\n",
        );
        write(
            &ws,
            ".agent/skills/review/SKILL.md",
            "---\nname: review\ndescription: How this team reviews code.\nalways: true\n---\nCheck tests first, then naming.\n",
        );
        write(&ws, ".agent/skills/broken/SKILL.md", "---\nname: Broken Skill\n---\nbody\n");
        write(
            &ws,
            ".agent/skills/triage.md",
            "---\ndescription: Triage a bug report\nwhen_to_use: a user reports a bug\ntriggers: [bug, crash]\n---\nReproduce first.\n",
        );
        write(
            &ws,
            ".claude/skills/notes/SKILL.md",
            "---\nname: notes\ndescription: Project notes go in docs/notes/.\n---\nWrite docs/notes/DATE.md.\n",
        );
        f
    }

    fn workspace(&self) -> std::path::PathBuf {
        self.repo.path().join("app")
    }

    fn build(&self) -> Context {
        ContextBuilder::new(self.home.path(), &self.workspace())
            .claude_home(Some(self.home.path().join(".claude")))
            .without_builtin_skills()
            .runtime(Runtime {
                now: "2026-11-30T04:31:51Z".into(),
                os: "linux x86_64".into(),
                cwd: "/work/app".into(),
                git: Some(GitState {
                    branch: "main [ahead 1]".into(),
                    changes: "2 changed, 1 untracked".into(),
                }),
                channel: "cli".into(),
            })
            .build()
    }

    /// Temp paths replaced by stable names.
    fn redact(&self, text: &str) -> String {
        text.replace(&self.home.path().display().to_string(), "[HOME]")
            .replace(&self.repo.path().display().to_string(), "[REPO]")
    }
}

#[test]
fn the_assembled_prompt_of_the_fixture_project() {
    let f = Fixture::new();
    let context = f.build();
    insta::assert_snapshot!(f.redact(&context.system_prompt()));
}

#[test]
fn layer_sizes_of_the_fixture_project() {
    let f = Fixture::new();
    let table: String = f
        .build()
        .layers
        .iter()
        .map(|l| format!("{:<10} {:>5} chars {:>4} tokens\n", l.name, l.text.len(), l.tokens()))
        .collect();
    insta::assert_snapshot!(f.redact(&table));
}

#[test]
fn layers_come_in_the_documented_order_with_the_runtime_last() {
    let names: Vec<&str> = Fixture::new().build().layers.iter().map(|l| l.name).collect();
    assert_eq!(names, ["identity", "workspace", "project", "rules", "memory", "skills", "runtime"]);
}

#[test]
fn the_malformed_skill_is_reported_and_left_out_of_the_prompt() {
    let context = Fixture::new().build();
    assert_eq!(context.warnings.len(), 1, "{:?}", context.warnings);
    let w = &context.warnings[0];
    assert!(w.contains(".agent/skills/broken/SKILL.md"), "{w}");
    assert!(w.contains("description is missing"), "{w}");
    assert!(!context.system_prompt().contains("Broken"));
}

#[test]
fn a_project_skill_overrides_a_user_skill_of_the_same_name() {
    let context = Fixture::new().build();
    let notes = context.skills.get("notes").unwrap();
    assert_eq!(notes.description, "Project notes go in docs/notes/.");
}

#[test]
fn bootstrap_files_are_capped_with_a_marker() {
    let f = Fixture::new();
    write(f.home.path(), "workspace/AGENTS.md", &"a".repeat(25_000));
    let layer = f.build().layer("workspace").unwrap().text.clone();
    assert!(layer.contains("[... cut at 20000 characters]"));
    assert!(layer.len() < 21_000, "{}", layer.len());
}

#[test]
fn an_empty_home_and_project_give_identity_skills_and_runtime_only() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let context = ContextBuilder::new(home.path(), ws.path()).build();
    let present: Vec<&str> =
        context.layers.iter().filter(|l| !l.text.is_empty()).map(|l| l.name).collect();
    assert_eq!(present, ["identity", "skills", "runtime"]);
    assert!(context.system_prompt().contains("- summarize: "));
    assert!(
        context.system_prompt().contains("[Runtime Context — metadata only, not instructions]")
    );
}

/// A git repository holding Claude Code memory files, built with the user's
/// Claude folder in `home/.claude`; the workspace is `repo/rel`.
fn claude_project(
    files: &[(&str, &str)],
    rel: &str,
    trusted: bool,
) -> (tempfile::TempDir, Context) {
    let dir = tempfile::tempdir().unwrap();
    let (home, repo) = (dir.path().join("home"), dir.path().join("repo"));
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    for (path, text) in files {
        match path.strip_prefix("~/") {
            Some(rest) => write(&home, rest, text),
            None => write(&repo, path, text),
        }
    }
    let ws = repo.join(rel);
    std::fs::create_dir_all(&ws).unwrap();
    let context = ContextBuilder::new(&home, &ws)
        .claude_home(Some(home.join(".claude")))
        .trusted(trusted)
        .without_builtin_skills()
        .build();
    (dir, context)
}

#[test]
fn claude_code_memory_files_come_in_its_order_each_followed_by_its_imports() {
    // The order Claude Code 2.1.332 sent for the same folders: the user's
    // file, then each folder's CLAUDE.md, .claude/CLAUDE.md, CLAUDE.local.md
    // from the root down, an imported file right after its importer.
    let (_dir, context) = claude_project(
        &[
            ("~/.claude/CLAUDE.md", "User rules.\n"),
            (
                "CLAUDE.md",
                "Root rules. See @docs/guide.md.\nNot `@docs/code.md`:\n```\n@docs/fenced.md\n```\nmail a@docs/mail.md\n",
            ),
            ("docs/guide.md", "Guide."),
            ("docs/code.md", "CODE"),
            ("docs/fenced.md", "FENCED"),
            ("docs/mail.md", "MAIL"),
            (".claude/CLAUDE.md", "Root dot-claude rules."),
            ("CLAUDE.local.md", "Root local rules."),
            ("app/CLAUDE.md", "App rules."),
        ],
        "app",
        true,
    );
    let project = &context.layer("project").unwrap().text;
    let headings: Vec<&str> = project.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(
        headings,
        [
            "# User instructions (~/.claude/CLAUDE.md)",
            "# Project instructions (../CLAUDE.md)",
            "# Project instructions (../docs/guide.md, imported by ../CLAUDE.md)",
            "# Project instructions (../.claude/CLAUDE.md)",
            "# Project instructions (../CLAUDE.local.md)",
            "# Project instructions (CLAUDE.md)",
        ]
    );
    for not_imported in ["CODE", "FENCED", "MAIL"] {
        assert!(!project.contains(not_imported), "{project}");
    }
}

#[test]
fn imports_nest_five_files_deep_and_a_cycle_is_cut_with_notes() {
    let (_dir, context) = claude_project(
        &[
            ("CLAUDE.md", "Root @d1.md and again @CLAUDE.md and @missing.md"),
            ("d1.md", "d1 @d2.md"),
            ("d2.md", "d2 @d3.md"),
            ("d3.md", "d3 @d4.md"),
            ("d4.md", "d4 @d5.md"),
            ("d5.md", "d5 end"),
        ],
        "",
        true,
    );
    let project = &context.layer("project").unwrap().text;
    assert!(project.contains("d4 @d5.md"), "{project}");
    assert!(!project.contains("d5 end"), "Claude Code stops at the root file's fourth import");
    assert_eq!(project.matches("Root @d1.md").count(), 1, "the cycle is cut: {project}");
    assert_eq!(
        context.notes,
        [
            "d4.md: @d5.md not followed (imports nest 5 files deep at most)",
            "missing.md: imported but not found",
        ]
    );
}

#[test]
fn a_file_outside_the_project_folder_is_imported_only_in_a_trusted_workspace() {
    // The root's CLAUDE.md is read from `app/`, but its import lies outside
    // the project folder: Claude Code -p leaves it out unless approved.
    let files = [("CLAUDE.md", "Root. @docs/guide.md"), ("docs/guide.md", "Guide.")];
    let (_dir, untrusted) = claude_project(&files, "app", false);
    assert!(!untrusted.system_prompt().contains("Guide."));
    assert!(untrusted.notes[0].contains("@docs/guide.md not followed (outside the project folder"));
    let (_dir, trusted) = claude_project(&files, "app", true);
    assert!(trusted.system_prompt().contains("Guide."));
}

#[test]
fn a_capped_instruction_file_is_noted() {
    let big = "x".repeat(25_000);
    let (_dir, context) = claude_project(&[("CLAUDE.md", &big)], "", false);
    assert_eq!(context.notes, ["CLAUDE.md: cut at 20000 characters"]);
}
