//! Pictures and files through the gateway, against the fake Telegram Bot
//! API: a photo reaches the model as an image; the `message` tool sends a
//! workspace file as a document and refuses a path outside the workspace.

mod common;
mod gateway_support;

use common::{Env, Wire};
use ferroclaw_testkit::{ScriptedToolCall, Turn};
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, wait_for};
use serde_json::json;

fn config(fake: &FakeTelegram) -> String {
    format!(
        "heartbeat_minutes = 0\npermission_mode = \"bypass\"\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\nallow_from = [\"42\"]\n",
        fake.base
    )
}

/// The bytes of a (tiny, not decodable) PNG: what matters is the signature.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRpicture";

#[test]
fn a_photo_reaches_the_model_as_an_image_and_a_workspace_file_goes_out_as_a_document() {
    let fake = FakeTelegram::start();
    let send = Turn::tools(vec![
        ScriptedToolCall::new(
            "message",
            json!({"content": "Here is the report.", "media": ["report.txt"]}),
        ),
        ScriptedToolCall::new(
            "message",
            json!({"content": "and this", "media": ["../../etc/passwd"]}),
        ),
    ]);
    let env = Env::new(Wire::OpenAi, vec![send.into(), Turn::text("Sent it.").into()]);
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("report.txt"), "quarterly numbers").unwrap();
    let _gw = Gateway::start(&env, &config(&fake));
    fake.user_sends_photo(42, "what is in this picture?", PNG);
    wait_for(30, "the answer", || fake.sent_to(42).iter().any(|t| t == "Sent it."));

    let first = env.request_body(0).to_string();
    let data = base64_of(PNG);
    assert!(first.contains(&format!("data:image/png;base64,{data}")), "{first}");
    assert!(first.contains("what is in this picture?"));

    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    let (method, body) = &uploads[0];
    assert_eq!(method, "sendDocument");
    assert!(
        body.contains("filename=\"report.txt\"") && body.contains("quarterly numbers"),
        "{body}"
    );
    assert!(body.contains("name=\"chat_id\"\r\n\r\n42\r\n"));
    assert!(fake.sent_to(42).iter().any(|t| t == "Here is the report."));
    let results = env.request_body(1).to_string();
    assert!(results.contains("not inside the workspace"), "{results}");
}

fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
