//! The end-to-end tests of the `ferroclaw` binary, one test binary (each file
//! of its own would link the whole program again: 45 copies, gigabytes of
//! disk and minutes of linking in CI). Run one file's tests with
//! `cargo test -p ferroclaw-cli --test e2e -- claude_diff::`.

mod common;
mod gateway_support;

mod acp;
mod agent_sdk;
mod children;
mod claude_diff;
mod code_graph;
mod commands;
mod compaction;
mod config_errors;
mod context;
mod doctor;
mod durability;
mod escape_oracle;
mod eval;
mod faults;
mod gateway_api;
mod gateway_api_turns;
mod gateway_approvals;
mod gateway_cron;
mod gateway_drain;
mod gateway_hooks;
mod gateway_load;
mod gateway_media;
mod gateway_redteam;
mod gateway_resume;
mod gateway_scale;
mod gateway_scale_faults;
mod gateway_scale_history;
mod gateway_stream;
mod gateway_telegram;
mod gateway_web;
mod gateway_web_page;
mod hooks;
mod lean_requests;
mod learning;
mod local_model;
mod mcp;
mod mcp_step_up;
mod odd_files;
mod oneshot;
mod oneshot_habits;
mod planning;
mod prompt_profile;
mod redteam;
mod redteam_gateway;
mod repl;
mod repl_keys;
mod rewind;
mod secrets;
mod sessions;
mod skills;
mod team;
mod tools_e2e;
mod trust;
mod worktrees;
