//! Property tests (proptest, bounded) for what chat platforms send: Telegram
//! updates, Discord MESSAGE_CREATE data and Slack `message` events become a
//! message or are skipped, never a panic.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::telegram::TelegramChannel;

const CASES: u32 = 500;

/// A hostile value for a field the parsers read.
fn field() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        Just(json!("<@U1> hi")),
        Just(json!("<@123> hi")),
        Just(json!("/start")),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"id": 1, "username": "x", "bot": true})),
        Just(json!([{"id": "1"}])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn telegram_updates_never_panic(a in field(), b in field(), c in field(), d in field()) {
        let update = json!({
            "update_id": a,
            "message": {"message_id": b, "text": c, "caption": d,
                        "chat": {"id": a, "type": b, "title": c},
                        "from": {"id": d, "username": c, "first_name": a, "is_bot": b},
                        "reply_to_message": {"text": a}, "entities": d},
        });
        let _ = TelegramChannel::inbound(&update);
        let edited = json!({"edited_message": {"text": a, "chat": b, "from": c}});
        let _ = TelegramChannel::inbound(&edited);
    }

    #[test]
    fn discord_messages_never_panic(a in field(), b in field(), c in field(), d in field(), bot in proptest::option::of("[0-9]{1,4}")) {
        let data = json!({
            "id": a, "channel_id": b, "guild_id": c, "content": d, "type": a,
            "author": {"id": b, "username": c, "bot": d, "global_name": a},
            "mentions": d, "attachments": c, "referenced_message": b,
        });
        let _ = crate::discord::inbound_message(data, bot.as_deref(), &["1".to_string()]);
    }

    #[test]
    fn slack_events_never_panic(a in field(), b in field(), c in field(), d in field(), bot in "[A-Z0-9]{0,4}") {
        let event = json!({
            "type": a, "subtype": b, "text": c, "user": d, "bot_id": a,
            "channel": b, "channel_type": c, "ts": d, "thread_ts": a, "files": b,
        });
        let _ = crate::slack::inbound_message(&event, &bot, &["C1".to_string()]);
        let message = json!({"type": "message", "text": c, "user": d, "channel": "C1", "channel_type": a});
        let _ = crate::slack::inbound_message(&message, &bot, &[]);
    }

}
