//! Names of `config.toml`'s settings that more than one crate checks: the
//! core config reader and the MCP server tables both say when one of them
//! was written under a `[table]` header by mistake.

/// The settings of `config.toml`'s top level.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "model",
    "max_turns",
    "max_tokens",
    "permission_mode",
    "allowed_dirs",
    "max_file_bytes",
    "context_window",
    "compaction_threshold",
];
