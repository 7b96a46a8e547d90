//! Running one side and reducing what it did to comparable facts: a flat map
//! from an aspect's path (`hooks[0].stdin.tool_input.file_path`,
//! `disk/a.txt`, `model[1].results[0].text`, `stream[2].tool_use`) to a
//! normalised value, with ids, times, session ids and temp paths replaced.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ferroclaw_testkit::ScriptedServer;
use serde_json::{Value, json};

use super::scenario::{Layout, Scenario, Side, lay_out, steps};

/// The model name both sides ask for.
const MODEL: &str = "claude-sonnet-4-5";
/// A side that runs longer than this is stuck (a scripted run takes seconds).
const RUN_TIMEOUT: Duration = Duration::from_secs(90);
/// Keys whose values change from run to run; compared by presence only.
const VOLATILE: &[&str] = &[
    "session_id",
    "uuid",
    "timestamp",
    "transcript_path",
    "agent_transcript_path",
    "duration_ms",
    "duration_api_ms",
    "ttft_ms",
    "total_cost_usd",
    "costUSD",
    "messaging_socket_path",
    "request_id",
    "agent_id",
];

/// Facts observed on one side: aspect path → normalised value.
pub(super) type Facts = BTreeMap<String, String>;

/// Runs `scenario` on `side` and returns its facts and its stderr (for reports).
pub(super) fn observe(scenario: &Scenario, side: Side, claude: &Path) -> (Facts, String) {
    let layout = lay_out(scenario);
    let server = ScriptedServer::start(steps(scenario, &layout, side));
    let mut cmd = match side {
        Side::Claude => claude_command(scenario, &layout, claude),
        Side::Ferroclaw => ferroclaw_command(scenario, &layout),
    };
    cmd.env("HOME", layout.home())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ANTHROPIC_API_KEY", "x")
        .env("ANTHROPIC_BASE_URL", server.url())
        .current_dir(layout.cwd(scenario))
        .stdin(std::process::Stdio::null());
    let mut cmd = assert_cmd::Command::from_std(cmd);
    cmd.timeout(RUN_TIMEOUT);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let dir = layout.dir.path().to_string_lossy().into_owned();
    let clean = |v: Value| normalise(v, &dir);
    let mut facts = Facts::new();
    facts.insert("exit_code".into(), out.status.code().unwrap_or(-1).to_string());
    let hooks = std::fs::read_to_string(layout.hook_log()).unwrap_or_default();
    // Numbered per event, so that an extra or missing event of one kind does
    // not shift every later one; hooks of parallel calls run at once, so the
    // runs of one event are ordered by their call's id.
    let mut runs: Vec<Value> = hooks
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| json!({"hook": line})))
        .collect();
    runs.sort_by(|a, b| {
        let call = |v: &Value| v["stdin"]["tool_use_id"].as_str().unwrap_or_default().to_string();
        (a["hook"].to_string(), call(a)).cmp(&(b["hook"].to_string(), call(b)))
    });
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for value in runs {
        let event = value["hook"].as_str().unwrap_or("?").to_string();
        let n = seen.entry(event.clone()).or_default();
        flatten(&format!("hooks.{event}[{n}]"), &clean(value["stdin"].clone()), &mut facts);
        *n += 1;
    }
    disk(&layout.root(), &layout.root(), &dir, &mut facts);
    let requests: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/messages")
        .map(|r| clean(r.body))
        .collect();
    model_facts(scenario, &requests, &mut facts);
    let messages: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| clean(serde_json::from_str(l).unwrap_or_else(|_| json!({"unparsed": l}))))
        .collect();
    stream_facts(&messages, &mut facts);
    if scenario.compare_schema {
        schema_facts(&messages, &mut facts);
    }
    // `FERROCLAW_CLAUDE_DIFF_SHOW=2` shows each side's whole `-p` output too.
    let stderr = match std::env::var("FERROCLAW_CLAUDE_DIFF_SHOW").is_ok_and(|v| v == "2") {
        true => format!("{stderr}\n--- stdout:\n{stdout}"),
        false => stderr,
    };
    (facts, stderr.replace(&dir, "<DIR>"))
}

fn claude_command(scenario: &Scenario, layout: &Layout, claude: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(claude);
    cmd.env_clear()
        .env("IS_SANDBOX", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CONFIG_DIR", layout.home().join(".claude"));
    // stream-json needs --verbose; json with it prints every message, not the result.
    if scenario.output == "stream-json" {
        cmd.arg("--verbose");
    }
    cmd.args(["-p", &scenario.prompt, "--output-format", &scenario.output]).args([
        "--permission-mode",
        &scenario.mode,
        "--model",
        MODEL,
    ]);
    cmd.args(scenario.args.iter().map(|a| layout.fill(a)));
    cmd
}

fn ferroclaw_command(scenario: &Scenario, layout: &Layout) -> std::process::Command {
    let bin =
        std::env::var_os("FERROCLAW_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_ferroclaw").into());
    let ferroclaw_home = layout.dir.path().join("ferroclaw-home");
    let env = |cmd: &mut std::process::Command| {
        cmd.env_clear()
            .env("HOME", layout.home())
            .env("FERROCLAW_HOME", &ferroclaw_home)
            .env("FERROCLAW_MODEL", format!("anthropic/{MODEL}"))
            .current_dir(layout.cwd(scenario));
    };
    // A user switching over trusts the project once, so that its
    // `.claude/settings.json` applies (Claude Code's -p skips its trust dialog).
    let mut trust = std::process::Command::new(&bin);
    env(&mut trust);
    let trusted = trust.arg("trust").stdin(std::process::Stdio::null()).output().unwrap();
    assert!(trusted.status.success(), "ferroclaw trust: {trusted:?}");
    let mut cmd = std::process::Command::new(&bin);
    env(&mut cmd);
    cmd.args(["-p", &scenario.prompt, "--output-format", &scenario.output]).args([
        "--stream-format",
        "claude",
        "--permission-mode",
        ferroclaw_mode(&scenario.mode),
    ]);
    cmd.args(scenario.args.iter().map(|a| layout.fill(a)));
    cmd
}

/// Claude Code's permission mode as ferroclaw spells it.
fn ferroclaw_mode(claude: &str) -> &str {
    match claude {
        "bypassPermissions" => "bypass",
        "acceptEdits" => "accept-edits",
        other => other,
    }
}

/// A tool result without Claude Code's `<system-reminder>` blocks (token
/// counts and such), which are compared as context, not as the result.
fn without_reminders(text: &str) -> String {
    let mut out = text.to_string();
    while let Some(start) = out.find("<system-reminder>") {
        let end = out[start..]
            .find("</system-reminder>")
            .map_or(out.len(), |e| start + e + "</system-reminder>".len());
        out.replace_range(start..end, "");
    }
    out.trim_end().to_string()
}

/// Files of the project after the run (not `.git`, not ferroclaw's `.agent`).
fn disk(root: &Path, dir: &Path, side_dir: &str, facts: &mut Facts) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if rel == ".git" || rel == ".agent" {
            continue;
        }
        if path.is_dir() {
            disk(root, &path, side_dir, facts);
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            facts.insert(format!("disk/{rel}"), text.replace(side_dir, "<DIR>"));
        }
    }
}

/// What reached the model: how many requests, each request's tool results,
/// and which of the scenario's markers it carried (system prompt or messages).
fn model_facts(scenario: &Scenario, requests: &[Value], facts: &mut Facts) {
    facts.insert("model.requests".into(), requests.len().to_string());
    for (i, body) in requests.iter().enumerate() {
        let model = body["model"].as_str().unwrap_or_default().to_string();
        facts.insert(format!("model[{i}].model"), model);
        let results = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result");
        for (j, block) in results.enumerate() {
            let text = match &block["content"] {
                Value::String(s) => s.clone(),
                v => {
                    v.as_array().into_iter().flatten().filter_map(|p| p["text"].as_str()).collect()
                }
            };
            let is_error = block["is_error"].as_bool().unwrap_or(false);
            facts.insert(format!("model[{i}].results[{j}].text"), without_reminders(&text));
            facts.insert(format!("model[{i}].results[{j}].is_error"), is_error.to_string());
        }
        if !scenario.markers.is_empty() {
            let seen = body.to_string();
            let found: Vec<&str> =
                scenario.markers.iter().map(String::as_str).filter(|m| seen.contains(m)).collect();
            facts.insert(format!("model[{i}].context"), found.join(", "));
        }
    }
}

/// The `-p` output, message by message: init's mode and folder, each text
/// and tool call, each tool result's error flag, the result's outcome.
fn stream_facts(messages: &[Value], facts: &mut Facts) {
    // Numbered per kind of item (`stream.tool_use[1]`), so that an extra
    // message of one kind does not shift the others.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut item = |facts: &mut Facts, kind: &str, value: Value| {
        let n = seen.entry(kind.to_string()).or_default();
        flatten(&format!("stream.{kind}[{n}]"), &value, facts);
        *n += 1;
    };
    for m in messages {
        match m["type"].as_str().unwrap_or_default() {
            "system" if m["subtype"] == "init" => item(
                facts,
                "init",
                json!({"cwd": m["cwd"], "permissionMode": m["permissionMode"], "model": m["model"]}),
            ),
            "system" => {
                let subtype = m["subtype"].as_str().unwrap_or("?");
                item(facts, &format!("system.{subtype}"), json!({"present": true}));
            }
            "assistant" => {
                for block in m["message"]["content"].as_array().into_iter().flatten() {
                    match block["type"].as_str() {
                        Some("text") => item(facts, "text", json!({"text": block["text"]})),
                        Some("tool_use") => item(
                            facts,
                            "tool_use",
                            json!({"tool_use": block["name"], "input": block["input"]}),
                        ),
                        other => item(facts, "block", json!({"block": other})),
                    }
                }
            }
            "user" => {
                for block in m["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        let is_error = block["is_error"].as_bool().unwrap_or(false);
                        item(facts, "tool_result", json!({"is_error": is_error}));
                    }
                }
            }
            "result" => {
                let denied: Vec<&Value> = m["permission_denials"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|d| &d["tool_name"])
                    .collect();
                let outcome = json!({
                    "subtype": m["subtype"], "is_error": m["is_error"], "text": m["result"],
                    "num_turns": m["num_turns"], "permission_denials": denied,
                });
                item(facts, "result", outcome);
            }
            other => item(facts, "other", json!({"message": other})),
        }
    }
}

/// The key sets of each kind of output message, for the schema scenario.
fn schema_facts(messages: &[Value], facts: &mut Facts) {
    let keys = |v: &Value| -> String {
        v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>().join(",")).unwrap_or_default()
    };
    for m in messages {
        let kind = format!(
            "{}/{}",
            m["type"].as_str().unwrap_or("?"),
            m["subtype"].as_str().unwrap_or("")
        );
        facts.entry(format!("schema.{kind}")).or_insert_with(|| keys(m));
        if m["message"].is_object() {
            facts.entry(format!("schema.{kind}.message")).or_insert_with(|| keys(&m["message"]));
            let usage = &m["message"]["usage"];
            facts.entry(format!("schema.{kind}.message.usage")).or_insert_with(|| keys(usage));
        }
        if m["usage"].is_object() {
            facts.entry(format!("schema.{kind}.usage")).or_insert_with(|| keys(&m["usage"]));
        }
    }
}

/// Flattens `value` into `facts` under `prefix` (`a.b[2].c`).
fn flatten(prefix: &str, value: &Value, facts: &mut Facts) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                flatten(&format!("{prefix}.{key}"), v, facts);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, facts);
            }
        }
        Value::String(s) => {
            facts.insert(prefix.to_string(), s.clone());
        }
        other => {
            facts.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Replaces the side's folder with `<DIR>`, UUIDs with `<UUID>`, and the
/// values of [`VOLATILE`] keys with `<volatile>`.
fn normalise(value: Value, dir: &str) -> Value {
    match value {
        Value::String(s) => Value::String(uuids_out(&s.replace(dir, "<DIR>"))),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| normalise(v, dir)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = if VOLATILE.contains(&k.as_str()) {
                        json!("<volatile>")
                    } else {
                        normalise(v, dir)
                    };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

/// Every `8-4-4-4-12` hex UUID in `text` replaced by `<UUID>`.
fn uuids_out(text: &str) -> String {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = text.as_bytes();
    let is_uuid_at = |at: usize| -> bool {
        let mut i = at;
        for (n, len) in SHAPE.iter().enumerate() {
            if n > 0 {
                if bytes.get(i) != Some(&b'-') {
                    return false;
                }
                i += 1;
            }
            for _ in 0..*len {
                if !bytes.get(i).is_some_and(u8::is_ascii_hexdigit) {
                    return false;
                }
                i += 1;
            }
        }
        true
    };
    let (mut out, mut i) = (String::new(), 0);
    while i < text.len() {
        if text.is_char_boundary(i) && is_uuid_at(i) {
            out.push_str("<UUID>");
            i += 36;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}
