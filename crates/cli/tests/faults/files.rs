//! Files no tool should swallow: a 1 GB sparse file (over the 64 MB bound
//! of the file tools), a file of NUL bytes and a text file that turns into
//! NUL bytes past its first 8 KB (both under the bound). Every file tool
//! refuses them, from their size or as binary, with bounded memory, and
//! leaves them as they were.

use std::path::Path;

use ferroclaw_testkit::{ScriptedToolCall, Turn};
use serde_json::json;

use super::harness;
use crate::common::{Env, Wire, tool_results};

/// Peak memory one run may reach with such files around (the Done-when
/// bound of issue 30 for `edit` on a 1 GB sparse file).
const PEAK_MIB: u64 = 300;

/// The calls each file gets, in one parallel batch: nothing changes it.
fn calls(path: &str) -> Vec<ScriptedToolCall> {
    vec![
        ScriptedToolCall::new("read", json!({"path": path})),
        ScriptedToolCall::new("edit", json!({"path": path, "old_string": "x", "new_string": "y"})),
        ScriptedToolCall::new(
            "multi_edit",
            json!({"path": path, "edits": [{"old_string": "x", "new_string": "y"}]}),
        ),
        ScriptedToolCall::new("grep", json!({"pattern": "x", "path": path})),
    ]
}

/// `path` made `len` bytes long without writing them (a sparse file), after
/// `head` bytes of text.
fn sparse(path: &Path, head: &[u8], len: u64) {
    std::fs::write(path, head).unwrap();
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

/// Bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// One odd file and what each tool must answer about it (`read`, `edit`,
/// `multi_edit`, `grep`, then `write` alone when it is not `None`).
struct Case {
    name: &'static str,
    head: &'static str,
    len: u64,
    read: &'static str,
    edit: &'static str,
    grep: &'static str,
    write: Option<&'static str>,
}

const OVER: &str = "over the 64 MB limit of the file tools";
const BINARY: &str = "looks like a binary file";
const NOT_SEARCHED: &str = "is a binary file (it has a NUL byte), so it was not searched";

const CASES: [Case; 3] = [
    Case {
        name: "huge.log",
        head: "",
        len: 1 << 30,
        read: OVER,
        edit: OVER,
        grep: NOT_SEARCHED,
        write: Some(OVER),
    },
    Case {
        name: "zeros.bin",
        head: "",
        len: 16 << 20,
        read: BINARY,
        edit: BINARY,
        grep: NOT_SEARCHED,
        write: Some("has not been read yet"),
    },
    // Text for 17 KB, then 16 MB of NUL bytes: past git's 8 KB test.
    Case {
        name: "late_nul.txt",
        head: "x marks the spot\n",
        len: 16 << 20,
        read: "has NUL bytes: binary data from there on, not shown",
        edit: "occurs 1000 times",
        grep: NOT_SEARCHED,
        write: None,
    },
];

#[test]
fn sparse_and_nul_files_are_refused_by_every_file_tool_with_bounded_memory() {
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    for case in &CASES {
        let name = case.name;
        let mut script = vec![Turn::tools(calls(name)).into()];
        if case.write.is_some() {
            let write = json!({"path": name, "content": "replaced\n"});
            script.push(Turn::tool("write", write).into());
        }
        script.push(Turn::text("ok").into());
        let env = Env::new(Wire::Anthropic, script);
        let path = env.ws().join(name);
        sparse(&path, case.head.repeat(1000).as_bytes(), case.len);
        let mut cmd = env.std_cmd();
        cmd.args(["-p", "look at it", "--yes"]);
        let run = harness::run_measured(cmd, |_| {});
        if run.code != 0 {
            problems.push(format!("{name}: exit {}: {}", run.code, run.stderr));
            continue;
        }
        let last = env.server.requests().len() - 1;
        let results = tool_results(&env.request_body(last));
        let wanted = [case.read, case.edit, case.edit, case.grep].into_iter().chain(case.write);
        let tools = ["read", "edit", "multi_edit", "grep", "write"];
        for (((text, _), want), tool) in results.iter().zip(wanted).zip(tools) {
            if !text.contains(want) || text.contains('\u{0}') {
                problems.push(format!("{name} {tool}: {}", &text[..text.len().min(300)]));
            }
        }
        let size = std::fs::metadata(&path).unwrap().len();
        if size != case.len {
            problems.push(format!("{name}: now {size} bytes"));
        }
        // Nor does a checkpoint copy it (git would read all of it).
        let kept = dir_bytes(&env.home.path().join("checkpoints"));
        if kept > 256 * 1024 {
            problems.push(format!("{name}: checkpoints hold {kept} bytes"));
        }
        if run.peak_mib() > PEAK_MIB {
            problems.push(format!("{name}: {} MiB peak", run.peak_mib()));
        }
        lines.push(format!("{name} ({} MB): {} MiB peak", case.len >> 20, run.peak_mib()));
    }
    harness::report(&format!(
        "odd files for read/edit/multi_edit/grep/write: {} files, each refused by every tool, \
         unchanged ({}); {} problems",
        CASES.len(),
        lines.join("; "),
        problems.len()
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}
