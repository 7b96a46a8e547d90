//! Property tests (proptest, bounded) for what core parses from disk:
//! session JSONL, config layers, frontmatter and skills. Any bytes give a
//! result or a clear error, never a panic.

use std::io::Write;
use std::path::Path;

use ferroclaw_core::session::{SessionLog, for_each_entry};
use ferroclaw_core::skills::{SkillRoot, SkillSet, SkillSource};
use ferroclaw_core::{config, frontmatter};
use proptest::prelude::*;

/// Cases per property (each may touch a temp file): cheap in CI.
const CASES: u32 = 300;

/// Text that looks like the format at hand some of the time.
fn texty(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![proptest::sample::select(pieces).prop_map(str::to_string), ".{0,16}", "\n"],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

const SESSION_PIECES: &[&str] = &[
    r#"{"type":"meta","id":"s1","cwd":"/w","model":"m","created":"2026-01-01T00:00:00Z","version":1}"#,
    r#"{"type":"message","ts":1,"message":{"role":"user","content":[{"type":"text","text":"hi"}]}}"#,
    r#"{"type":"message","ts":2,"message":{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"bash","input":{}}]}}"#,
    r#"{"type":"message","ts":3,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[]}]}}"#,
    r#"{"type":"compaction","ts":4,"summary":"s"}"#,
    "{",
    "}",
    "\"",
    "\n",
    "\u{0}",
    "\u{feff}",
    "null",
    "[]",
];

const CONFIG_PIECES: &[&str] = &[
    "model = \"anthropic/x\"\n",
    "[sandbox]\n",
    "enabled = false\n",
    "writable = [\"~/.cargo\"]\n",
    "env = [\"GITHUB_TOKEN\"]\n",
    "tcp_connect = [443]\n",
    "[permissions]\n",
    "allow = [\"bash(ls*)\"]\n",
    "[providers.p]\n",
    "wire = \"openai\"\n",
    "base_url = \"http://x\"\n",
    "max_turns = -1\n",
    "[[x]]\n",
    "= \n",
    "\"\"\"",
    "[mcp_servers.a]\n",
    "command = 1\n",
    "allowed_dirs = [\"/\"]\n",
];

const FRONTMATTER_PIECES: &[&str] = &[
    "---\n",
    "---\r\n",
    "name: x\n",
    "description: y\n",
    "allowed-tools: [read, bash]\n",
    "  - a\n",
    ": :\n",
    "key: [\n",
    "'",
    "\"",
    "\t",
    "---",
    "\u{feff}",
    "metadata:\n  a: 1\n",
];

fn write(path: &Path, text: &str) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn session_files_load_or_fail_cleanly(text in texty(SESSION_PIECES), tail in 0u64..4096) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        write(&path, &text);
        let _ = for_each_entry(&path, |_| {});
        if let Ok(mut resumed) = SessionLog::resume(&path, tail) {
            // A resumed log takes new lines after whatever was there.
            let _ = resumed.log.sync();
        }
    }

    #[test]
    fn config_layers_parse_or_fail_with_a_position(text in texty(CONFIG_PIECES)) {
        if let Err(e) = config::parse_layer(Path::new("config.toml"), &text) {
            prop_assert!(e.to_string().contains("config.toml"), "{e}");
        }
    }

    #[test]
    fn frontmatter_parses_or_fails_cleanly(text in texty(FRONTMATTER_PIECES)) {
        let _ = frontmatter::parse(&text);
    }

    #[test]
    fn skills_load_or_report_a_problem(text in texty(FRONTMATTER_PIECES), name in "[a-z-]{1,12}") {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir.join("SKILL.md"), &text);
        let set = SkillSet::from_roots(
            &[SkillRoot { dir: root.path().to_path_buf(), source: SkillSource::Project }],
            false,
        );
        prop_assert!(set.skills().len() + set.problems().len() >= 1, "the skill or a problem");
        let _ = set.summary();
        let _ = set.prompt_layer();
    }
}
