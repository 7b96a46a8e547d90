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
