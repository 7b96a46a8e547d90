//! Skills at scale and through the tool registry: what 100 installed skills
//! cost in the system prompt (layer 1, names and descriptions only), and
//! `load_skill` as the model calls it.

use std::sync::Arc;
use std::time::Instant;

use ferroclaw_core::ContextBuilder;
use ferroclaw_core::skills::{LoadSkillTool, SkillSet};
use ferroclaw_tools::{ToolContext, ToolRegistry};
use serde_json::json;

/// A description of typical length (the built-ins average ~190 characters).
fn description(i: usize) -> String {
    format!(
        "Automate task number {i}: prepare the inputs, run the project's tooling for it, check \
         the output and report what changed. Use when the user asks for task {i} or its variants."
    )
}

fn install(home: &std::path::Path, n: usize) {
    for i in 0..n {
        let dir = home.join(format!("skills/task-{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: task-{i:03}\ndescription: \"{}\"\n---\n{}",
                description(i),
                "Step.\n".repeat(200)
            ),
        )
        .unwrap();
    }
}

#[test]
fn one_hundred_installed_skills_cost_about_five_thousand_tokens_in_the_prompt() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    install(home.path(), 100);
    let started = Instant::now();
    let context = ContextBuilder::new(home.path(), ws.path()).without_builtin_skills().build();
    let elapsed = started.elapsed();
    let layer = context.layer("skills").unwrap();
    let per_skill = layer.tokens() as f64 / 100.0;
    println!(
        "100 skills: skills layer {} chars, ~{} tokens (~{per_skill:.0} per skill); bodies stay out (~300 tokens each); discovery + build {elapsed:?}",
        layer.text.len(),
        layer.tokens(),
    );
    assert_eq!(context.skills.skills().len(), 100);
    assert!(!layer.text.contains("Step."), "bodies are not in the prompt");
    assert!(layer.tokens() < 6_000, "{}", layer.tokens());
}

#[tokio::test]
async fn load_skill_runs_through_the_registry_with_schema_validation() {
    let home = tempfile::tempdir().unwrap();
    install(home.path(), 3);
    let skills = SkillSet::discover(home.path(), home.path());
    let mut tools = ToolRegistry::new();
    tools.register(LoadSkillTool::new(Arc::new(skills)));
    assert!(tools.validate("load_skill", &json!({})).is_err());
    assert!(tools.validate("load_skill", &json!({"name": "task-001"})).is_ok());
    let tool = tools.get("load_skill").unwrap();
    assert!(tool.read_only());
    let out = tool.execute(json!({"name": "task-001"}), &ToolContext::new("/")).await.unwrap();
    assert!(out.joined_text().starts_with("<skill name=\"task-001\">\nStep."));
    let out = tool.execute(json!({"name": "nope"}), &ToolContext::new("/")).await.unwrap();
    assert!(out.is_error);
    assert!(
        out.joined_text()
            .contains("task-000, task-001, task-002, github, skill-creator, summarize")
            || out.joined_text().contains("github, skill-creator, summarize, task-000"),
        "{}",
        out.joined_text()
    );
}
