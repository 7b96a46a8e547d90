//! `ferroclaw acp`: a scripted ACP client drives the real binary against the
//! scripted model through a whole session (initialize, new, a prompt whose
//! tool call the client approves and whose write goes through the client,
//! a prompt cancelled while its permission question is open, modes, list,
//! and a load in a new process replaying the history), and checks every
//! frame the agent sends against the protocol's JSON schema (generated
//! from the official schema crate's types).

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use common::{Env, Wire};
use ferroclaw_testkit::{Fault, Step, Turn};
use serde_json::{Value, json};

/// Longest wait for one frame: a hung agent fails the test instead of
/// hanging it (not a timing assertion).
const FRAME_WAIT: Duration = Duration::from_secs(60);

fn schema_of<T: schemars::JsonSchema>() -> jsonschema::Validator {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// The schema each frame must match, by what it is.
struct Schemas(HashMap<&'static str, jsonschema::Validator>);

impl Schemas {
    fn new() -> Schemas {
        let mut m = HashMap::new();
        m.insert("initialize", schema_of::<acp::InitializeResponse>());
        m.insert("session/new", schema_of::<acp::NewSessionResponse>());
        m.insert("session/load", schema_of::<acp::LoadSessionResponse>());
        m.insert("session/resume", schema_of::<acp::ResumeSessionResponse>());
        m.insert("session/list", schema_of::<acp::ListSessionsResponse>());
        m.insert("session/prompt", schema_of::<acp::PromptResponse>());
        m.insert("session/set_mode", schema_of::<acp::SetSessionModeResponse>());
        m.insert("session/update", schema_of::<acp::SessionNotification>());
        m.insert("session/request_permission", schema_of::<acp::RequestPermissionRequest>());
        m.insert("fs/read_text_file", schema_of::<acp::ReadTextFileRequest>());
        m.insert("fs/write_text_file", schema_of::<acp::WriteTextFileRequest>());
        Schemas(m)
    }

    fn check(&self, what: &str, value: &Value) {
        let validator = self.0.get(what).unwrap_or_else(|| panic!("no schema for {what}"));
        let errors: Vec<String> = validator.iter_errors(value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{what} does not match the ACP schema: {errors:?}\n{value:#}");
    }
}

/// The scripted client: writes requests, reads and checks every frame.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// Methods of our requests still unanswered, by id.
    asked: HashMap<u64, String>,
    schemas: Schemas,
    /// Every frame the agent sent, in order.
    frames: Vec<Value>,
}

impl Client {
    fn start(env: &Env) -> Client {
        Client::start_with(env, &[])
    }

    /// `ferroclaw acp FLAGS...`.
    fn start_with(env: &Env, flags: &[&str]) -> Client {
        let mut child = env
            .std_cmd()
            .arg("acp")
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Client {
            child,
            stdin,
            lines,
            next_id: 0,
            asked: HashMap::new(),
            schemas: Schemas::new(),
            frames: Vec::new(),
        }
    }

    fn write(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.asked.insert(id, method.to_string());
        self.write(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.write(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn answer(&mut self, id: &Value, result: Value) {
        self.write(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// The next frame, checked: one JSON object per line, and its payload
    /// matching the schema of its method.
    fn next(&mut self) -> Value {
        let line = self.lines.recv_timeout(FRAME_WAIT).expect("the agent sent nothing");
        let frame: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON message per line ({e}): {line}"));
        assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
        if let Some(method) = frame["method"].as_str() {
            self.schemas.check(method, &frame["params"]);
        } else {
            let id = frame["id"].as_u64().expect("a response to one of our requests");
            let method = self.asked.remove(&id).expect("a response to a request we sent");
            assert!(frame.get("error").is_none(), "{method} failed: {frame}");
            self.schemas.check(&method, &frame["result"]);
        }
        self.frames.push(frame.clone());
        frame
    }

    /// Frames until the response to `id` (handing requests to `on_request`).
    fn until_response(
        &mut self,
        id: u64,
        mut on_request: impl FnMut(&mut Client, &Value),
    ) -> (Value, Vec<Value>) {
        let mut updates = Vec::new();
        loop {
            let frame = self.next();
            if frame["id"] == json!(id) && frame.get("method").is_none() {
                return (frame["result"].clone(), updates);
            }
            match frame["method"].as_str() {
                Some("session/update") => updates.push(frame["params"]["update"].clone()),
                Some(_) => on_request(self, &frame),
                None => {}
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.send(method, params);
        self.until_response(id, |_, frame| panic!("unexpected request {frame}"))
    }

    /// Closes stdin and waits for the agent to exit.
    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

fn kinds(updates: &[Value]) -> Vec<&str> {
    updates.iter().filter_map(|u| u["sessionUpdate"].as_str()).collect()
}

fn initialize(client: &mut Client) -> Value {
    client
        .request(
            "initialize",
            json!({
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false},
                "clientInfo": {"name": "scripted-client", "version": "1"},
            }),
        )
        .0
}

#[test]
fn an_editor_drives_a_whole_session_over_acp() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Step::Reply(Turn::tool("write", json!({"path": "hello.txt", "content": "hi\n"}))),
            Step::Reply(Turn::text("I wrote hello.txt.")),
            Step::Reply(Turn::tool("bash", json!({"command": "touch cancelled.txt"}))),
        ],
    );
    let ws = env.ws().canonicalize().unwrap();
    let commands_dir = ws.join(".agent/commands");
    std::fs::create_dir_all(&commands_dir).unwrap();
    std::fs::write(
        commands_dir.join("review.md"),
        "---\ndescription: Review the diff\nargument-hint: [file]\n---\nReview $ARGUMENTS\n",
    )
    .unwrap();
    let mut client = Client::start(&env);

    let init = initialize(&mut client);
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["agentCapabilities"]["promptCapabilities"]["image"], true);
    assert_eq!(init["agentCapabilities"]["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(init["authMethods"], json!([]), "a key is set: nothing to authenticate");

    let (new, _) = client.request("session/new", json!({"cwd": ws, "mcpServers": []}));
    let session = new["sessionId"].as_str().unwrap().to_string();
    assert_eq!(new["modes"]["currentModeId"], "default");
    // The session's slash commands follow its answer.
    let commands = client.next();
    assert_eq!(commands["params"]["update"]["sessionUpdate"], "available_commands_update");
    let names = commands["params"]["update"]["availableCommands"].to_string();
    assert!(names.contains("\"compact\"") && names.contains("\"usage\""), "{names}");
    // The project's custom commands are offered too, with their hint.
    assert!(names.contains("\"review\"") && names.contains("Review the diff"), "{names}");
    assert!(names.contains("[file]"), "{names}");

    // A write needs permission: the client allows it once, and the agent
    // writes through the client (which offered fs/write_text_file).
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "write hello.txt"}]}),
    );
    let mut asked = Vec::new();
    let (result, updates) = client.until_response(id, |client, frame| {
        let method = frame["method"].as_str().unwrap();
        asked.push(method.to_string());
        match method {
            "session/request_permission" => {
                let kinds: Vec<&str> = frame["params"]["options"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o["kind"].as_str().unwrap())
                    .collect();
                assert_eq!(kinds, ["allow_once", "allow_always", "reject_once", "reject_always"]);
                client.answer(
                    &frame["id"],
                    json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
                );
            }
            "fs/write_text_file" => {
                let p = &frame["params"];
                std::fs::write(p["path"].as_str().unwrap(), p["content"].as_str().unwrap())
                    .unwrap();
                client.answer(&frame["id"], json!({}));
            }
            other => panic!("unexpected request {other}"),
        }
    });
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(asked, ["session/request_permission", "fs/write_text_file"]);
    assert_eq!(std::fs::read_to_string(ws.join("hello.txt")).unwrap(), "hi\n");
    let call = updates.iter().find(|u| u["sessionUpdate"] == "tool_call").unwrap();
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["content"][0]["type"], "diff");
    assert_eq!(call["content"][0]["newText"], "hi\n");
    assert_eq!(call["locations"][0]["path"], json!(ws.join("hello.txt")));
    let done = updates.iter().find(|u| u["status"] == "completed").unwrap();
    assert_eq!(done["content"][0]["type"], "diff", "the finished edit shows its diff: {done}");
    let k = kinds(&updates);
    assert!(k.contains(&"usage_update"), "{k:?}");
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "I wrote hello.txt.");

    // Cancelled while the permission question is open: the client answers
    // `cancelled`, the command never runs, the prompt ends cancelled.
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "touch a file"}]}),
    );
    let (result, _) = client.until_response(id, |client, frame| {
        assert_eq!(frame["method"], "session/request_permission");
        let session = frame["params"]["sessionId"].clone();
        client.notify("session/cancel", json!({"sessionId": session}));
        client.answer(&frame["id"], json!({"outcome": {"outcome": "cancelled"}}));
    });
    assert_eq!(result["stopReason"], "cancelled");
    assert!(!ws.join("cancelled.txt").exists());

    let (_, updates) =
        client.request("session/set_mode", json!({"sessionId": session, "modeId": "accept-edits"}));
    assert_eq!(updates[0]["currentModeId"], "accept-edits");

    let (list, _) = client.request("session/list", json!({"cwd": ws}));
    let listed: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(listed.contains(&session.as_str()), "{list}");
    assert!(list["sessions"][0]["updatedAt"].is_string(), "{list}");
    assert!(client.finish().success());

    // A new process loads the session and replays it as updates.
    let mut client = Client::start(&env);
    initialize(&mut client);
    let (_, updates) =
        client.request("session/load", json!({"sessionId": session, "cwd": ws, "mcpServers": []}));
    let k = kinds(&updates);
    assert_eq!(k[0], "user_message_chunk", "{k:?}");
    assert_eq!(updates[0]["content"]["text"], "write hello.txt");
    assert!(k.contains(&"tool_call"), "{k:?}");
    assert!(
        updates.iter().any(|u| u["content"]["text"] == "I wrote hello.txt."),
        "the answer is replayed: {updates:?}"
    );
    assert!(client.finish().success());

    // Resuming continues the session without replaying it.
    let mut client = Client::start(&env);
    initialize(&mut client);
    let (resumed, updates) =
        client.request("session/resume", json!({"sessionId": session, "cwd": ws}));
    assert_eq!(updates, Vec::<Value>::new());
    assert_eq!(resumed["modes"]["currentModeId"], "default");
    assert!(client.finish().success());
}

#[test]
fn a_missing_provider_key_asks_the_client_to_authenticate() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let mut cmd = env.std_cmd();
    cmd.env_remove("ANTHROPIC_API_KEY").env_remove("FERROCLAW_MODEL");
    let mut child = cmd
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let ws = env.ws().canonicalize().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":1}}}}"#
    )
    .unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd": ws, "mcpServers": []}})).unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":3,"method":"authenticate","params":{{"methodId":"provider-key"}}}}"#).unwrap();
    writeln!(stdin, "this is not json").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let frames: HashMap<String, Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|f| (f["id"].to_string(), f))
        .collect();
    let methods = &frames["1"]["result"]["authMethods"];
    assert_eq!(methods[0]["id"], "provider-key", "{methods}");
    assert!(methods[0]["description"].as_str().unwrap().contains("API"), "{methods}");
    assert_eq!(frames["2"]["error"]["code"], -32000, "session/new needs a key: {:?}", frames["2"]);
    assert_eq!(frames["3"]["error"]["code"], -32000);
    assert_eq!(frames["null"]["error"]["code"], -32700, "bad input gets one clear error");
}

#[test]
fn the_schema_check_rejects_frames_the_protocol_does_not_allow() {
    let schemas = Schemas::new();
    let bad = json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}});
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        schemas.check("session/update", &bad);
    }));
    assert!(result.is_err(), "a chunk without content must not pass");
    let good = json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "hi"}}});
    schemas.check("session/update", &good);
}

#[test]
fn the_editors_mcp_servers_join_ours_and_a_streaming_answer_can_be_cancelled() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Step::Fault(Fault::Stall { after_text: "Let me think".into() })],
    );
    let ws = env.ws().canonicalize().unwrap();
    let mut client = Client::start(&env);
    initialize(&mut client);
    // The editor's MCP server: ferroclaw's own tools over stdio.
    let server = json!({
        "name": "editor",
        "command": env!("CARGO_BIN_EXE_ferroclaw"),
        "args": ["mcp", "serve"],
        "env": [{"name": "FERROCLAW_HOME", "value": env.home.path()}],
    });
    let (new, _) = client.request("session/new", json!({"cwd": ws, "mcpServers": [server]}));
    let session = new["sessionId"].as_str().unwrap().to_string();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "think"}]}),
    );
    // Cancelled once the answer streams; the model never finishes it.
    while client.next()["params"]["update"]["sessionUpdate"] != "agent_message_chunk" {}
    client.notify("session/cancel", json!({"sessionId": session}));
    let (result, _) = client.until_response(id, |_, frame| panic!("unexpected request {frame}"));
    assert_eq!(result["stopReason"], "cancelled");
    let tools: Vec<String> = env.request_body(0)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tools.iter().any(|t| t == "mcp__editor__read"), "{tools:?}");
    assert!(client.finish().success());
}

#[test]
fn edits_go_through_the_editors_buffer_with_the_repl_flags_after_acp() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Step::Reply(Turn::tool("read", json!({"path": "a.txt"}))),
            Step::Reply(Turn::tool(
                "edit",
                json!({"path": "a.txt", "old_string": "unsaved", "new_string": "edited"}),
            )),
            // The user types in the buffer: the next edit is stale.
            Step::Reply(Turn::tool(
                "multi_edit",
                json!({"path": "a.txt", "edits": [{"old_string": "edited", "new_string": "again"}]}),
            )),
            Step::Reply(Turn::text("done")),
        ],
    );
    let ws = env.ws().canonicalize().unwrap();
    std::fs::write(ws.join("a.txt"), "saved line\n").unwrap();
    // Session flags after `acp`, as the README shows them.
    let mut client = Client::start_with(
        &env,
        &["--model", "anthropic/buffer-model", "--permission-mode", "bypass"],
    );
    initialize(&mut client);
    let (new, _) = client.request("session/new", json!({"cwd": ws, "mcpServers": []}));
    let session = new["sessionId"].as_str().unwrap().to_string();
    let _commands = client.next();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "edit a.txt"}]}),
    );
    let mut buffer = "unsaved line\n".to_string();
    let mut written = Vec::new();
    let (result, _) = client.until_response(id, |client, frame| {
        let p = &frame["params"];
        match frame["method"].as_str().unwrap() {
            "fs/read_text_file" => {
                client.answer(&frame["id"], json!({"content": buffer}));
            }
            "fs/write_text_file" => {
                written.push(p["content"].as_str().unwrap().to_string());
                buffer = format!("{}typed by the user\n", p["content"].as_str().unwrap());
                buffer = buffer.replace("edited", "retyped");
                client.answer(&frame["id"], json!(null));
            }
            other => panic!("unexpected request {other}"),
        }
    });
    assert_eq!(result["stopReason"], "end_turn");
    // The edit applied to the buffer the model read, and went back to the
    // editor; the disk copy is the editor's to save.
    assert_eq!(written, ["edited line\n"]);
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "saved line\n");
    let bodies: Vec<Value> = env.server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies[0]["model"], "buffer-model");
    let results = common::tool_results(&bodies[3]);
    assert!(results[0].0.contains("unsaved line"), "read shows the buffer: {results:?}");
    assert!(results[2].1, "{results:?}");
    assert!(results[2].0.ends_with(ferroclaw_tools::CHANGED_SINCE_READ), "{results:?}");
    client.finish();
}

#[test]
fn an_editor_write_decided_before_its_folder_became_a_link_to_a_denied_one_is_refused() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Step::Reply(Turn::tool("write", json!({"path": "x/new.txt", "content": "planted\n"}))),
            Step::Reply(Turn::text("done")),
        ],
    );
    env.write_home_config("[permissions]\ndeny = [\"Edit(./secrets/**)\"]\n");
    let ws = env.ws().canonicalize().unwrap();
    std::fs::create_dir_all(ws.join("secrets")).unwrap();
    std::fs::create_dir_all(ws.join("x")).unwrap();
    let mut client = Client::start(&env);
    initialize(&mut client);
    let (new, _) = client.request("session/new", json!({"cwd": ws, "mcpServers": []}));
    let session = new["sessionId"].as_str().unwrap().to_string();
    let _commands = client.next();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "write x/new.txt"}]}),
    );
    let mut asked = Vec::new();
    let (result, _) = client.until_response(id, |client, frame| {
        let method = frame["method"].as_str().unwrap();
        asked.push(method.to_string());
        assert_eq!(method, "session/request_permission", "the editor was asked to write");
        // While the user reads the question, `x` becomes a link to `secrets`.
        std::fs::remove_dir(ws.join("x")).unwrap();
        std::os::unix::fs::symlink("secrets", ws.join("x")).unwrap();
        client.answer(
            &frame["id"],
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        );
    });
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(asked, ["session/request_permission"]);
    assert!(!ws.join("secrets/new.txt").exists(), "a file landed in secrets/");
    let bodies: Vec<Value> = env.server.requests().into_iter().map(|r| r.body).collect();
    let results = common::tool_results(&bodies[1]);
    assert!(results[0].1, "{results:?}");
    assert!(results[0].0.contains("edit(./secrets/**) in config"), "{results:?}");
    client.finish();
}
