//! The integration tests of this crate, one test binary (a binary a file
//! would link the crate and its dependencies again for each: disk and link
//! time in CI). One file's tests: `cargo test --test integration -- FILE::`.

mod oracle;
mod support;

mod agent_loop;
mod context_compaction;
mod context_memory;
mod context_prompt;
mod context_recall;
mod context_skills;
mod exec_oracle;
mod fuzz;
mod hooks_loop;
mod turn_journal;
