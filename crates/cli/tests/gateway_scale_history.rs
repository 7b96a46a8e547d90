//! What people read on gateways that share one PostgreSQL database and no
//! folder: every gateway lists the same conversations and shows each one
//! whole, whichever gateway ran its turns, at once after a gateway is
//! killed and restarted; a picture a person sent through one, and a file
//! the agent sent through one, are served by the other; `ferroclaw
//! sessions` on either box reads the same; and `gateway import|export`
//! carry the titles people gave and the files the agent sent.

use crate::common;
use crate::gateway_support;

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use common::{Env, Wire};
use ferroclaw_testkit::{PgCluster, ScriptedToolCall, Turn};
use gateway_support::{Gateway, TOKEN, chat, echo_env, free_port, request};
use serde_json::{Value, json};

/// The config of a gateway on `url` whose model echoes.
fn store_config(url: &str) -> String {
    format!(
        "[retry]\nmax_attempts = 2\nbase_delay_ms = 10\nmax_delay_ms = 50\n\n[gateway]\ntoken = \"{TOKEN}\"\n\
         heartbeat_minutes = 0\nrequests_per_minute = 0\nmessages_per_minute = 0\nstore = \"{url}\"\n"
    )
}

/// Two homes (two machines) configured for `url`.
fn two_machines(url: &str) -> (Env, tempfile::TempDir) {
    let env = echo_env();
    env.write_home_config(&store_config(url));
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("config.toml"), store_config(url)).unwrap();
    (env, other)
}

/// `GET path` of the web app's API, as JSON.
fn api(port: u16, path: &str) -> (u16, Value) {
    let (status, body) = request(port, "GET", path, Some(TOKEN), None).expect("no answer");
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The conversations a gateway lists: (id, title), in its order.
fn listed(port: u16) -> Vec<(String, String)> {
    let (status, body) = api(port, "/api/sessions");
    assert_eq!(status, 200, "{body}");
    body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap().to_string(), s["title"].as_str().unwrap().to_string()))
        .collect()
}

/// A conversation's user and assistant texts as a gateway shows them.
fn shown(port: u16, id: &str) -> Vec<(String, String)> {
    let (status, body) = api(port, &format!("/api/sessions/{id}"));
    assert_eq!(status, 200, "{id} on port {port}: {body}");
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "user" || i["kind"] == "assistant")
        .map(|i| (i["kind"].as_str().unwrap().to_string(), i["text"].as_str().unwrap().to_string()))
        .collect()
}

/// What a conversation of `said` (echoed) shows: each message and its answer.
fn whole(said: &[String]) -> Vec<(String, String)> {
    said.iter()
        .flat_map(|t| {
            [("user".to_string(), t.clone()), ("assistant".to_string(), format!("echo: {t}"))]
        })
        .collect()
}

#[test]
fn gateways_that_share_no_folder_show_the_same_list_and_whole_histories_even_after_a_kill() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("one_truth_history");
    let (env, other_home) = two_machines(&url);
    let mut a = Gateway::spawn(&env, free_port());
    let b = Gateway::spawn_in(&env, other_home.path(), free_port());
    // Six messages, alternately to each gateway (whichever claims one runs it).
    let mut said = Vec::new();
    for m in 0..6 {
        let text = format!("plan step {m}");
        let port = if m % 2 == 0 { a.port } else { b.port };
        assert_eq!(chat(port, "ada", &text), (200, format!("echo: {text}")));
        said.push(text);
    }
    // Another conversation, one message, through one gateway only.
    assert_eq!(chat(b.port, "bob", "hello from bob"), (200, "echo: hello from bob".into()));
    let ada = "gw-web-api-ada";
    for port in [a.port, b.port] {
        assert_eq!(shown(port, ada), whole(&said), "port {port}");
        assert_eq!(shown(port, "gw-web-api-bob"), whole(&["hello from bob".into()]));
    }
    let list = listed(a.port);
    let ids: Vec<&str> = list.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["gw-web-api-bob", ada], "newest first");
    assert_eq!(list[1].1, "plan step 0", "a conversation is shown by its first request");
    assert_eq!(listed(b.port), list);
    // A name given on one gateway is the name on the other.
    let renamed = request(
        b.port,
        "PUT",
        &format!("/api/sessions/{ada}/title"),
        Some(TOKEN),
        Some(&json!({"title": "Trip plan"})),
    );
    assert_eq!(renamed.map(|(s, _)| s), Some(200));
    assert_eq!(listed(a.port)[1], (ada.to_string(), "Trip plan".to_string()));
    // A search finds the same on either, whichever ran the turns.
    for port in [a.port, b.port] {
        let (_, found) = api(port, "/api/sessions?q=FROM%20BOB");
        let found = found["sessions"].as_array().unwrap().clone();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0]["id"], "gw-web-api-bob");
        assert!(found[0]["snippet"].as_str().unwrap().contains("hello from bob"), "{found:?}");
    }

    // kill -9 one of them and start it again on its own home: it shows the
    // same at once, and so does the survivor after more messages.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let a = Gateway::spawn(&env, free_port());
    assert_eq!(listed(a.port), listed(b.port));
    for (m, port) in [(6, b.port), (7, a.port)] {
        let text = format!("plan step {m}");
        assert_eq!(chat(port, "ada", &text), (200, format!("echo: {text}")));
        said.push(text);
    }
    for port in [a.port, b.port] {
        assert_eq!(shown(port, ada), whole(&said), "port {port} after the restart");
    }
    assert_eq!(listed(a.port), listed(b.port));
    // A chat's page is told the session the database names.
    let (_, state) = api(b.port, "/api/chats/api-ada");
    assert_eq!(state["session"], ada);

    // `ferroclaw sessions` on either machine reads the database too.
    for home in [env.home.path(), other_home.path()] {
        let list = sessions_cmd(&env, home, &["list"]);
        assert!(list.contains(ada) && list.contains("gw-web-api-bob"), "{list}");
        assert!(list.contains("Trip plan"), "{list}");
        let show = sessions_cmd(&env, home, &["show", ada]);
        for text in &said {
            assert!(show.contains(&format!("› {text}")), "{text}: {show}");
            assert!(show.contains(&format!("echo: {text}")), "{text}: {show}");
        }
        let bob = sessions_cmd(&env, home, &["show", "gw-web-api-b"]);
        assert!(bob.contains("› hello from bob"), "a unique start of an id: {bob}");
    }
}

/// `ferroclaw sessions ARGS` with `home`, in the gateway's workspace there.
fn sessions_cmd(env: &Env, home: &Path, args: &[&str]) -> String {
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let out = env
        .std_cmd()
        .env("FERROCLAW_HOME", home)
        .current_dir(&workspace)
        .arg("sessions")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{args:?}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// A one-pixel PNG, as the web page sends it (base64), and its bytes.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
const PNG_BYTES: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x04\x00\x00\x00\xb5\x1c\x0c\x02\x00\x00\x00\x0b\x49\x44\x41\x54\x78\xda\x63\x64\x60\x00\x00\x00\x06\x00\x02\x30\x81\xd0\x2f\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";

/// Sends `frame` on chat `chat`'s page at `port` and returns its answer's frame.
fn say_on_page(port: u16, chat: &str, frame: Value) -> Value {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as Frame;
    let url = format!("ws://127.0.0.1:{port}/ws?token={TOKEN}&chat={chat}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        let (mut sink, mut stream) = ws.split();
        sink.send(Frame::Text(frame.to_string().into())).await.unwrap();
        loop {
            // A guard against a hang, not a timing claim.
            let next = tokio::time::timeout(Duration::from_secs(60), stream.next()).await;
            let Ok(Some(Ok(Frame::Text(text)))) = next else { panic!("no frame: {next:?}") };
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["type"] == "reply" || frame["type"] == "error" {
                return frame;
            }
        }
    })
}

/// `GET path` with the token: (status, content type, body bytes).
fn fetch_bytes(port: u16, path: &str) -> (u16, String, Vec<u8>) {
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\nauthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a response");
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let kind = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    (status, kind, raw[split + 4..].to_vec())
}

#[test]
fn a_picture_sent_through_one_gateway_is_shown_by_the_other() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("one_truth_pictures");
    let (env, other_home) = two_machines(&url);
    let a = Gateway::spawn(&env, free_port());
    let b = Gateway::spawn_in(&env, other_home.path(), free_port());
    let message = json!({"type": "message", "content": "what is in this picture?",
                         "images": [{"media_type": "image/png", "data": PNG}]});
    let answer = say_on_page(a.port, "pics", message);
    assert_eq!(answer["content"], "echo: what is in this picture?");
    // The other gateway shows the picture in the history, and serves it.
    let link = "/api/sessions/gw-web-pics/images/0";
    for port in [b.port, a.port] {
        let (status, body) = api(port, "/api/sessions/gw-web-pics");
        assert_eq!(status, 200, "{body}");
        assert!(body["items"].to_string().contains(link), "the history links the picture: {body}");
        let (status, kind, bytes) = fetch_bytes(port, link);
        assert_eq!((status, kind.as_str()), (200, "image/png"), "port {port}");
        assert_eq!(bytes, PNG_BYTES, "the picture as it was sent");
    }
    let (status, _, _) = fetch_bytes(b.port, "/api/sessions/gw-web-pics/images/7");
    assert_eq!(status, 404);
}

#[test]
fn a_file_the_agent_sent_through_one_gateway_is_served_by_the_other() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("one_truth_sent_files");
    let send = Turn::tools(vec![ScriptedToolCall::new(
        "message",
        json!({"content": "Here is the chart.", "media": ["charts/q3.png"]}),
    )]);
    let env = Env::new(Wire::OpenAi, vec![send.into(), Turn::text("Sent it.").into()]);
    let config = store_config(&url) + "permission_mode = \"bypass\"\n";
    env.write_home_config(&config);
    let other_home = tempfile::tempdir().unwrap();
    std::fs::write(other_home.path().join("config.toml"), &config).unwrap();
    // The chart is in the first machine's workspace only.
    let charts = env.home.path().join("workspace").join("charts");
    std::fs::create_dir_all(&charts).unwrap();
    std::fs::write(charts.join("q3.png"), PNG_BYTES).unwrap();
    let a = Gateway::spawn(&env, free_port());
    assert_eq!(chat(a.port, "ada", "send me the chart"), (200, "Sent it.".to_string()));
    let b = Gateway::spawn_in(&env, other_home.path(), free_port());
    let (status, kind, bytes) = fetch_bytes(b.port, "/api/files?path=charts/q3.png");
    assert_eq!((status, kind.as_str()), (200, "image/png"), "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(bytes, PNG_BYTES);
    assert!(!other_home.path().join("workspace").join("charts").exists());
}

#[test]
fn import_and_export_carry_the_titles_people_gave_and_the_files_the_agent_sent() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("one_truth_transfer");
    let send = Turn::tools(vec![ScriptedToolCall::new(
        "message",
        json!({"content": "Here is the chart.", "media": ["charts/q3.png"]}),
    )]);
    let env = Env::new(Wire::OpenAi, vec![send.into(), Turn::text("Sent it.").into()]);
    // A box on its own files: the agent sends a chart, the person names the chat.
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\npermission_mode = \"bypass\"\n"
    ));
    let charts = env.home.path().join("workspace").join("charts");
    std::fs::create_dir_all(&charts).unwrap();
    std::fs::write(charts.join("q3.png"), PNG_BYTES).unwrap();
    let alone = Gateway::spawn(&env, free_port());
    assert_eq!(chat(alone.port, "ada", "send me the chart"), (200, "Sent it.".to_string()));
    let (id, _) = listed(alone.port).pop().expect("the conversation");
    alone.terminate();
    let titles = ferroclaw_gateway::sessions::SessionTitles::load(env.home.path());
    crate::gateway_scale::files_now(titles.set(&id, "Q3 chart")).unwrap();

    let (ok, out, err) = crate::gateway_scale::transfer(&env, env.home.path(), &url, "import");
    assert!(ok, "{err}");
    assert!(out.contains("session titles: 1 stored, 0 already there"), "{out}");
    assert!(out.contains("files sent to chats: 1 stored, 0 already there"), "{out}");
    let (ok, out, _) = crate::gateway_scale::transfer(&env, env.home.path(), &url, "import");
    assert!(ok);
    assert!(out.contains("session titles: 0 stored, 1 already there"), "{out}");
    assert!(out.contains("files sent to chats: 0 stored, 1 already there"), "{out}");

    // A gateway on another machine shows the title and serves the chart.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("config.toml"), store_config(&url)).unwrap();
    let b = Gateway::spawn_in(&env, other.path(), free_port());
    assert_eq!(listed(b.port), [(id.clone(), "Q3 chart".to_string())]);
    let (status, kind, bytes) = fetch_bytes(b.port, "/api/files?path=charts/q3.png");
    assert_eq!((status, kind.as_str()), (200, "image/png"));
    assert_eq!(bytes, PNG_BYTES);
    b.terminate();

    // Exported into a third box's files: the title and the chart come too.
    let third = tempfile::tempdir().unwrap();
    std::fs::write(third.path().join("config.toml"), "").unwrap();
    let (ok, out, err) = crate::gateway_scale::transfer(&env, third.path(), &url, "export");
    assert!(ok, "{err}");
    assert!(out.contains("session titles: 1 written, 0 already there"), "{out}");
    assert!(out.contains("files sent to chats: 1 written, 0 already there"), "{out}");
    let titles = ferroclaw_gateway::sessions::SessionTitles::load(third.path());
    let title = crate::gateway_scale::files_now(titles.get(&id)).unwrap();
    assert_eq!(title.as_deref(), Some("Q3 chart"));
    let chart = third.path().join("workspace").join("charts").join("q3.png");
    assert_eq!(std::fs::read(&chart).unwrap(), PNG_BYTES);
    let (ok, out, _) = crate::gateway_scale::transfer(&env, third.path(), &url, "export");
    assert!(ok);
    assert!(out.contains("files sent to chats: 0 written, 1 already there"), "{out}");
}

/// Makes `path` look last changed `days` ago.
fn age(path: &Path, days: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(days * 86_400)).unwrap();
}

#[test]
fn media_older_than_media_keep_days_is_pruned_from_the_inbox_and_the_database() {
    // Housekeeping every 200 ms instead of every 10 minutes.
    let vars = [("FERROCLAW_TEST_HOUSEKEEPING_MS", "200")];
    let env = echo_env();
    let inbox = env.home.path().join("workspace").join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let received = |names: &[&str]| {
        for name in names {
            std::fs::write(inbox.join(name), b"%PDF").unwrap();
        }
        age(&inbox.join(names[0]), 40);
    };
    let left = || {
        let mut names: Vec<String> = std::fs::read_dir(&inbox)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // On files: a month's keep takes the 40-day-old file people sent, not
    // yesterday's.
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nmedia_keep_days = 30\n"
    ));
    received(&["march.pdf", "yesterday.pdf"]);
    let alone = Gateway::spawn_with(&env, env.home.path(), free_port(), &vars);
    gateway_support::wait_for(60, "the old file to go", || left() == ["yesterday.pdf"]);
    alone.terminate();

    // With a database: the files the agent sent go from the database too.
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("media_keep");
    env.write_home_config(&(store_config(&url) + "media_keep_days = 30\n"));
    received(&["april.pdf"]);
    let shared = Gateway::spawn_with(&env, env.home.path(), free_port(), &vars);
    gateway_support::wait_for(60, "the old file to go", || left() == ["yesterday.pdf"]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let kept = |sql: &str| {
        rt.block_on(async {
            let (client, connection) =
                tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
            let task = tokio::spawn(connection);
            let rows = client.query(sql, &[]).await.unwrap();
            drop(client);
            let _ = task.await;
            rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<String>>()
        })
    };
    kept(
        "INSERT INTO media (id, media_type, name, bytes, created_at) VALUES
            ('charts/q1.png', 'image/png', 'q1.png', '\\x89504e47', now() - interval '40 days'),
            ('charts/q3.png', 'image/png', 'q3.png', '\\x89504e47', now())
         RETURNING id",
    );
    gateway_support::wait_for(60, "the old chart to go", || {
        kept("SELECT id FROM media ORDER BY id") == ["charts/q3.png"]
    });
    shared.terminate();
}

/// How many rows `sql` (a `count(*)`) finds in the database at `url`.
fn count(url: &str, sql: &str) -> i64 {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        let task = tokio::spawn(connection);
        let n = client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0);
        drop(client);
        let _ = task.await;
        n
    })
}

/// A scale-out gateway's journal does not grow with every turn it ran: a
/// turn's steps (recorded before its tool ran) leave the database once its
/// message is answered and `store_keep_days` have passed, though the
/// gateway's journal writes no finish mark of its own.
#[test]
fn a_turns_journal_steps_leave_the_database_after_store_keep_days_once_answered() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("steps_keep");
    let env = Env::new(
        Wire::OpenAi,
        vec![Turn::tool("list_dir", json!({"path": "."})).into(), Turn::text("one folder").into()],
    );
    let steps = "SELECT count(*) FROM turn_steps";
    let vars = [("FERROCLAW_TEST_HOUSEKEEPING_MS", "200")];
    env.write_home_config(&(store_config(&url) + "store_keep_days = 7\n"));
    let gw = Gateway::spawn_with(&env, env.home.path(), free_port(), &vars);
    assert_eq!(chat(gw.port, "ann", "what is here?"), (200, "one folder".to_string()));
    assert!(count(&url, steps) >= 2, "what began the turn and the tool call are on record");
    gw.terminate();
    // A keep of about a second: the answered turn's steps go.
    env.write_home_config(&(store_config(&url) + "store_keep_days = 0.00001\n"));
    let gw = Gateway::spawn_with(&env, env.home.path(), free_port(), &vars);
    gateway_support::wait_for(60, "the answered turn's steps to go", || count(&url, steps) == 0);
    gw.terminate();
}
