//! What an OpenAI API request asks of the turn that answers it, as the
//! model sees it: the sampling options a client sets (`temperature`,
//! `top_p`, `max_tokens`, `seed`, `stop`) reach the provider's request on
//! each wire, for that turn only, and bad values are refused as OpenAI
//! refuses them; a front-end that regenerates or edits in a `user` session
//! gets its answer from the conversation it sent, and the session follows.

use crate::common;
use crate::gateway_support;

use common::{Env, Wire};
use ferroclaw_testkit::{LAST_USER, ServerOptions, Turn};
use gateway_support::{Gateway, TOKEN};
use serde_json::{Value, json};

/// A POST to `/v1/chat/completions`: (status, JSON body).
fn complete(port: u16, body: &Value) -> (u16, Value) {
    let raw = gateway_support::request_raw(port, "/v1/chat/completions", TOKEN, body);
    let status = raw.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The model requests whose last message is the user's `text`.
fn model_requests_for(env: &Env, text: &str) -> Vec<Value> {
    let last_text = |body: &Value| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned();
        let content = last.map(|m| m["content"].clone()).unwrap_or_default();
        match content {
            Value::String(s) => s,
            // Anthropic's blocks.
            other => other[0]["text"].as_str().unwrap_or_default().to_string(),
        }
    };
    let requests = env.server.requests().into_iter().map(|r| r.body);
    requests.filter(|b| last_text(b) == text).collect()
}

fn model_request_for(env: &Env, text: &str) -> Value {
    let found = model_requests_for(env, text);
    assert_eq!(found.len(), 1, "model requests for {text:?}: {found:?}");
    found[0].clone()
}

fn ask(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[test]
fn sampling_options_reach_the_model_for_their_turn_only_and_bad_values_are_refused() {
    let env = gateway_support::echo_env();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let tuned = json!({"user": "sam", "messages": ask("tuned"), "temperature": 0.3,
        "top_p": 0.8, "max_completion_tokens": 77, "seed": 9, "stop": ["END", "STOP"]});
    assert_eq!(complete(gw.port, &tuned).0, 200);
    let plain = json!({"user": "sam", "messages": ask("plain")});
    assert_eq!(complete(gw.port, &plain).0, 200);
    let stateless = json!({"messages": ask("brief"), "max_tokens": 5, "temperature": 0});
    assert_eq!(complete(gw.port, &stateless).0, 200);

    let tuned = model_request_for(&env, "tuned");
    let sent = |k: &str| tuned[k].clone();
    assert_eq!(
        [sent("temperature"), sent("top_p"), sent("max_tokens"), sent("seed"), sent("stop")],
        [json!(0.3), json!(0.8), json!(77), json!(9), json!(["END", "STOP"])],
        "{tuned}"
    );
    // The next turn of the same session asks nothing: the defaults again.
    let plain = model_request_for(&env, "plain");
    assert!(["temperature", "top_p", "seed", "stop"].iter().all(|k| plain.get(k).is_none()));
    assert!(plain["max_tokens"].as_u64().is_some_and(|n| n != 77), "{plain}");
    let brief = model_request_for(&env, "brief");
    assert_eq!((&brief["max_tokens"], &brief["temperature"]), (&json!(5), &json!(0.0)));

    // Out of range or of the wrong type: 400 naming the field, as OpenAI does.
    for (field, value, code) in [
        ("temperature", json!(2.5), "decimal_above_max_value"),
        ("top_p", json!(-0.5), "decimal_below_min_value"),
        ("max_tokens", json!(0), "integer_below_min_value"),
        ("max_completion_tokens", json!(-1), "integer_below_min_value"),
        ("seed", json!("x"), "invalid_type"),
        ("stop", json!(["a", "b", "c", "d", "e"]), "array_above_max_length"),
    ] {
        let mut body = json!({"user": "sam", "messages": ask("refused")});
        body[field] = value;
        let (status, body) = complete(gw.port, &body);
        let error = &body["error"];
        assert_eq!(status, 400, "{field}: {body}");
        assert_eq!(
            (&error["type"], &error["param"], &error["code"]),
            (&json!("invalid_request_error"), &json!(field), &json!(code)),
            "{body}"
        );
    }
    assert!(model_requests_for(&env, "refused").is_empty(), "refused requests reach no model");
}

#[test]
fn the_anthropic_wire_gets_stop_sequences_and_the_options_it_has_a_field_for() {
    let options = ServerOptions { repeat: true, ..Default::default() };
    let echo = Turn::text(format!("echo: {LAST_USER}"));
    let env = Env::with_options(Wire::Anthropic, vec![echo.into()], options);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let body = json!({"messages": ask("careful"), "temperature": 0.5, "top_p": 0.9, "seed": 3,
        "stop": "END", "max_tokens": 100});
    let (status, answer) = complete(gw.port, &body);
    assert_eq!(
        (status, &answer["choices"][0]["message"]["content"]),
        (200, &json!("echo: careful"))
    );
    let nucleus = json!({"messages": ask("nucleus"), "top_p": 0.9});
    assert_eq!(complete(gw.port, &nucleus).0, 200);

    let sent = model_request_for(&env, "careful");
    assert_eq!((&sent["temperature"], &sent["stop_sequences"]), (&json!(0.5), &json!(["END"])));
    assert_eq!(sent["max_tokens"], 100);
    // No seed on this wire, and its models take temperature or top_p, not both.
    assert!(sent.get("seed").is_none() && sent.get("top_p").is_none(), "{sent}");
    assert_eq!(model_request_for(&env, "nucleus")["top_p"], json!(0.9));
}

/// The user and assistant texts of a model request, in order (OpenAI wire).
fn conversation_of(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let said = messages.iter().filter(|m| m["role"] == "user" || m["role"] == "assistant");
    said.map(|m| m["content"].as_str().unwrap_or_default().to_string()).collect()
}

/// The user and assistant texts the web app shows of the conversation
/// whose id begins with `prefix`.
fn shown_conversation(port: u16, prefix: &str) -> Vec<String> {
    let get = |path: &str| {
        let (status, body) =
            gateway_support::request(port, "GET", path, Some(TOKEN), None).unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str::<Value>(&body).unwrap()
    };
    let list = get("/api/sessions");
    let sessions = list["sessions"].as_array().cloned().unwrap_or_default();
    let id = sessions.iter().filter_map(|s| s["id"].as_str()).find(|id| id.starts_with(prefix));
    let id = id.unwrap_or_else(|| panic!("no conversation {prefix}...: {list}"));
    let items =
        get(&format!("/api/sessions/{id}"))["items"].as_array().cloned().unwrap_or_default();
    let said = items.iter().filter(|i| i["kind"] == "user" || i["kind"] == "assistant");
    said.map(|i| i["text"].as_str().unwrap_or_default().to_string()).collect()
}

#[test]
fn a_front_end_that_regenerates_or_edits_in_a_user_session_gets_the_branch_it_sent() {
    if !gateway_support::python_openai() {
        return;
    }
    let env = gateway_support::echo_env();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../gateway/tests/openai_branches.py");
    let out =
        std::process::Command::new("python3").args([script, &gw.url(), TOKEN]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));

    let first = ["where is the key?", "echo: where is the key?"];
    // The regenerate asked the model with the conversation as sent: the same
    // as the first time, not the question twice with the old answer between.
    let blue = model_requests_for(&env, "under the blue pot");
    assert_eq!(blue.len(), 2, "the answer and its regeneration");
    assert_eq!(conversation_of(&blue[1]), [&first[..], &["under the blue pot"]].concat());
    // The edit and the turn after it see the edited branch only.
    let red = model_request_for(&env, "under the red mat");
    assert_eq!(conversation_of(&red), [&first[..], &["under the red mat"]].concat());
    let third = model_request_for(&env, "which colour was it?");
    let branch = ["under the red mat", "echo: under the red mat", "which colour was it?"];
    assert_eq!(conversation_of(&third), [&first[..], &branch[..]].concat());

    // The web app shows the conversation as the client has it.
    let shown = shown_conversation(gw.port, "gw-web-api-carol");
    assert_eq!(shown, [&first[..], &branch[..], &["echo: which colour was it?"]].concat());

    // The session follows the branch: after a restart, a request that sends
    // only its new message continues the edited conversation.
    drop(gw);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let (status, _) = complete(gw.port, &json!({"user": "carol", "messages": ask("and now?")}));
    assert_eq!(status, 200);
    let resumed = conversation_of(&model_request_for(&env, "and now?"));
    let expected = [&first[..], &branch[..], &["echo: which colour was it?", "and now?"]].concat();
    assert_eq!(resumed, expected);
}
