//! Versioned migrations: each is SQL applied once, in order, in one
//! transaction, under an advisory lock so gateways starting together do not
//! race; `ferroclaw_schema` records which ran. A database whose version is
//! newer than the last one here was written by a newer binary: refused.

use tokio_postgres::Client;

use crate::StoreError;

/// The schema version this binary writes and reads.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The advisory lock migrations run under (any fixed number; "fcmg").
const MIGRATION_LOCK: i64 = 0x6663_6d67;

/// Migration `i + 1` is `MIGRATIONS[i]`. Never edit one that shipped: add another.
pub const MIGRATIONS: &[&str] = &[
    // 1: the first scale-out schema.
    r#"
CREATE TABLE inbound (
    id          bigserial PRIMARY KEY,
    channel     text NOT NULL,
    platform_id text NOT NULL,
    chat        text NOT NULL,
    origin      text,
    body        jsonb NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    attempts    int NOT NULL DEFAULT 0,
    done_at     timestamptz,
    UNIQUE (channel, platform_id)
);
-- The claim's two lookups: the oldest waiting messages, and a chat's older one.
CREATE INDEX inbound_next ON inbound (id) WHERE done_at IS NULL;
CREATE INDEX inbound_waiting ON inbound (chat, id) WHERE done_at IS NULL;

CREATE TABLE chat_leases (
    chat       text PRIMARY KEY,
    holder     text NOT NULL,
    inbound_id bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE outbound (
    key          text PRIMARY KEY,
    channel      text NOT NULL,
    chat         text NOT NULL,
    origin       text,
    body         jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    delivered_by text
);
CREATE INDEX outbound_waiting ON outbound (created_at) WHERE delivered_at IS NULL;

CREATE TABLE channel_leases (
    channel    text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE cron_jobs (
    id         text PRIMARY KEY,
    body       jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE cron_runs (
    job         text NOT NULL,
    slot        bigint NOT NULL,
    holder      text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    outcome     text,
    PRIMARY KEY (job, slot)
);

CREATE TABLE allow_list (
    channel  text NOT NULL,
    sender   text NOT NULL,
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, sender)
);

CREATE TABLE pairing_requests (
    channel    text NOT NULL,
    code       text NOT NULL,
    sender     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, code)
);

CREATE TABLE turn_steps (
    session     text NOT NULL,
    turn        text NOT NULL,
    step        int NOT NULL,
    body        jsonb NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, turn, step)
);

CREATE TABLE turns_finished (
    session     text NOT NULL,
    turn        text NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, turn)
);
"#,
    // pgops: pairing details, approvals across processes, indexes for pruning.
    r#"
ALTER TABLE allow_list ADD COLUMN name text;
ALTER TABLE pairing_requests ADD COLUMN chat_id text NOT NULL DEFAULT '';
ALTER TABLE pairing_requests ADD COLUMN name text;
CREATE UNIQUE INDEX pairing_requests_sender ON pairing_requests (channel, sender);
-- Jobs are listed in the order they were added, as in cron/jobs.json.
ALTER TABLE cron_jobs ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();

CREATE TABLE approvals (
    id          text PRIMARY KEY,
    channel     text NOT NULL,
    chat_id     text NOT NULL,
    owner       text NOT NULL,
    tool        text NOT NULL,
    prompt      jsonb NOT NULL,
    asked_by    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    shown_by    text,
    answer      text,
    reason      text,
    answered_by text,
    outcome     text,
    resolved_at timestamptz
);
CREATE INDEX approvals_open ON approvals (created_at) WHERE outcome IS NULL;

CREATE INDEX inbound_done ON inbound (done_at) WHERE done_at IS NOT NULL;
CREATE INDEX outbound_delivered ON outbound (delivered_at) WHERE delivered_at IS NOT NULL;
CREATE INDEX turns_finished_at ON turns_finished (finished_at);
"#,
    // pgsess: chat sessions, line for line as their JSONL files have them,
    // so gateways on machines that share no folder open the same
    // conversation. `session_files` says how far a session goes (lines and
    // bytes, updated with the lines in one transaction); `end_at` is where a
    // line ends in the file (its newline counted), so a worker whose copy
    // stops at byte N fetches only what follows. `chat_sessions`: the session
    // a chat talks in now (`/new` moves it on).
    r#"
CREATE TABLE session_files (
    session    text PRIMARY KEY,
    lines      int NOT NULL,
    bytes      bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE session_lines (
    session text NOT NULL REFERENCES session_files ON DELETE CASCADE,
    seq     int NOT NULL,
    end_at  bigint NOT NULL,
    line    text NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE INDEX session_lines_end ON session_lines (session, end_at);

CREATE TABLE chat_sessions (
    chat       text PRIMARY KEY,
    session    text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
"#,
    // cronlease: cron runs are leased like chat turns. The running process renews
    // `lease_until`; an unfinished run whose lease ran out (its process
    // died) is taken over and run again by another, up to a few attempts.
    // Runs recorded before, and heartbeat slots (which are not runs), have
    // no lease: they never block a job nor are taken over.
    r#"
ALTER TABLE cron_runs ADD COLUMN lease_until timestamptz,
                      ADD COLUMN attempts int NOT NULL DEFAULT 1;
CREATE INDEX cron_runs_leased ON cron_runs (lease_until)
    WHERE finished_at IS NULL AND lease_until IS NOT NULL;
"#,
    // onetruth: what every gateway shows the same (see `conversations`).
    crate::conversations::CONVERSATIONS_MIGRATION,
    // liveness: the gateway registry and liveness locks (see `registry`).
    crate::registry::REGISTRY_MIGRATION,
    // apiidem: OpenAI API requests sent with an Idempotency-Key, and their
    // answers, so a retried request is answered again without a second turn
    // whichever gateway it reaches.
    r#"
CREATE TABLE api_requests (
    key         text PRIMARY KEY,
    fingerprint text NOT NULL,
    body        jsonb NOT NULL,
    answer      jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    answered_at timestamptz
);
CREATE INDEX api_requests_created ON api_requests (created_at);
"#,
    // leaserule: one rule for every lease, with a grace after the database
    // server restarts (see `registry`).
    crate::registry::LEASE_RULE_MIGRATION,
];

/// The version the database is at (0 when it has no ferroclaw schema).
pub(crate) async fn current_version(client: &Client) -> Result<i32, StoreError> {
    let exists = client
        .query_one("SELECT to_regclass('ferroclaw_schema') IS NOT NULL", &[])
        .await?
        .get::<_, bool>(0);
    if !exists {
        return Ok(0);
    }
    let row =
        client.query_one("SELECT coalesce(max(version), 0) FROM ferroclaw_schema", &[]).await?;
    Ok(row.get(0))
}

/// Applies the migrations the database lacks; returns the versions applied.
/// A newer schema than [`SCHEMA_VERSION`] is [`StoreError::SchemaTooNew`].
pub(crate) async fn migrate(client: &mut Client, url: &str) -> Result<Vec<i32>, StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS ferroclaw_schema (
             version int PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    let found: i32 =
        tx.query_one("SELECT coalesce(max(version), 0) FROM ferroclaw_schema", &[]).await?.get(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            url: url.to_string(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    let mut applied = Vec::new();
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = i as i32 + 1;
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO ferroclaw_schema (version) VALUES ($1)", &[&version]).await?;
        applied.push(version);
    }
    tx.commit().await?;
    Ok(applied)
}

/// Refuses a schema this binary cannot use (newer; or older, when it may not migrate).
pub(crate) fn check(url: &str, found: i32) -> Result<(), StoreError> {
    match found.cmp(&SCHEMA_VERSION) {
        std::cmp::Ordering::Greater => {
            Err(StoreError::SchemaTooNew { url: url.into(), found, known: SCHEMA_VERSION })
        }
        std::cmp::Ordering::Less => {
            Err(StoreError::SchemaTooOld { url: url.into(), found, known: SCHEMA_VERSION })
        }
        std::cmp::Ordering::Equal => Ok(()),
    }
}
