//! End-to-end: `ferroclaw skills list|show|check`.

use crate::common;

use common::{Env, Wire, run};

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn env_with_skills() -> Env {
    let env = Env::new(Wire::Anthropic, vec![]);
    write(
        env.ws(),
        ".agent/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy to staging.\nmetadata:\n  requires:\n    env: [FERROCLAW_TEST_DEPLOY_TOKEN]\n---\nRun make deploy.\n",
    );
    write(
        env.home.path(),
        "skills/notes/SKILL.md",
        "---\nname: notes\ndescription: Meeting notes.\n---\nWrite notes.\n",
    );
    env
}

#[test]
fn list_shows_every_skill_with_its_source_and_status() {
    let env = env_with_skills();
    let (code, stdout, _) = run(env.cmd().args(["skills", "list"]));
    assert_eq!(code, 0);
    let deploy = stdout.lines().find(|l| l.starts_with("deploy")).unwrap();
    assert!(deploy.contains("project") && deploy.contains("unavailable"), "{deploy}");
    let notes = stdout.lines().find(|l| l.starts_with("notes")).unwrap();
    assert!(notes.contains("user") && notes.contains("available"), "{notes}");
    assert!(stdout.contains("skill-creator"), "{stdout}");
}

#[test]
fn show_prints_the_skill_and_an_unknown_name_lists_the_others() {
    let env = env_with_skills();
    let (code, stdout, _) = run(env.cmd().args(["skills", "show", "deploy"]));
    assert_eq!(code, 0);
    assert!(
        stdout.contains("unavailable: needs environment variable FERROCLAW_TEST_DEPLOY_TOKEN"),
        "{stdout}"
    );
    assert!(stdout.contains("<skill name=\"deploy\">\nRun make deploy.\n</skill>"), "{stdout}");
    let (code, _, stderr) = run(env.cmd().args(["skills", "show", "nope"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("no skill \"nope\"; skills: deploy, github, notes"), "{stderr}");
}

#[test]
fn check_passes_on_valid_skills_and_fails_naming_the_malformed_file() {
    let env = env_with_skills();
    let (code, stdout, _) = run(env.cmd().args(["skills", "check"]));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("0 errors"), "{stdout}");
    write(
        env.ws(),
        ".agent/skills/pdf/SKILL.md",
        "---\nname: PDF\ndescription: Fill forms.\n---\n",
    );
    let (code, stdout, _) = run(env.cmd().args(["skills", "check"]));
    assert_eq!(code, 1, "{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("error:")).unwrap();
    assert!(line.contains(".agent/skills/pdf/SKILL.md"), "{line}");
    assert!(line.contains("name \"PDF\" has 'P'; use only a-z, 0-9 and hyphens"), "{line}");
    assert!(stdout.contains("1 errors"), "{stdout}");
}

#[test]
fn the_prompts_skill_list_has_a_budget_and_says_how_many_were_left_out() {
    // Claude Code caps its skill listing the same way; a long list used to
    // go into every request whole.
    let env = Env::new(Wire::Anthropic, vec![]);
    for i in 0..150 {
        let text = format!(
            "---\nname: skill-{i:03}\ndescription: Does task number {i} of the many tasks this team repeats weekly.\n---\nDo it.\n"
        );
        write(env.ws(), &format!(".agent/skills/skill-{i:03}/SKILL.md"), &text);
    }
    let (code, raw, _) = run(env.cmd().args(["context", "--raw"]));
    assert_eq!(code, 0);
    // The 150 and the three built-ins, listed one per line until the budget.
    let section = &raw[raw.find("# Skills").unwrap()..];
    let listed = section.lines().filter(|l| l.starts_with("- ")).count();
    assert!((50..150).contains(&listed), "{listed} listed");
    let note = format!("({} more skills not listed", 153 - listed);
    assert!(raw.contains(&note), "{note} missing");
    assert!(raw.contains("load_skill loads any skill by name)"));
    let (code, stdout, _) =
        run(env.cmd().args(["context"]).env("SLASH_COMMAND_TOOL_CHAR_BUDGET", "1000"));
    assert_eq!(code, 0);
    let listed = stdout.lines().filter(|l| l.starts_with("- skill-0")).count();
    assert!(listed < 15, "the variable sets the budget: {listed} listed");
    assert!(stdout.contains("note: skills: "), "ferroclaw context says so");
}

#[test]
fn a_skill_over_the_cap_is_named_with_its_size_and_the_cap() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let body = format!("---\nname: big\ndescription: a big one\n---\n{}", "y".repeat(5 << 20));
    write(env.ws(), ".claude/skills/big/SKILL.md", &body);
    let (_, stdout, stderr) = run(env.cmd().args(["skills", "list"]));
    let said = format!("{stdout}{stderr}");
    assert!(said.contains("SKILL.md is 5.0 MB (") && said.contains("over the 4 MB cap"), "{said}");
}
