//! The fault suite: the real binary against the scripted provider, under
//! the faults a machine really has, each test ending with a tally line
//! (printed past the test harness's capture, so CI logs show it) of what it
//! tried and what held.
//!
//! - `kills`: kill -9 at seeded points of `-p` runs with tools, then
//!   `--continue`;
//! - `disk`: a full disk (a small tmpfs under the session files) at seeded
//!   points, and I/O errors injected with `strace` into the session file's
//!   writes and syncs;
//! - `provider`: endless and huge answers on both wires;
//! - `files`: sparse huge files and NUL-heavy files for the file tools.
//!
//! Memory is the kernel's own measure of each run's peak (`ru_maxrss` from
//! `wait4`). Needs `strace` (a failure without it, unless
//! `FERROCLAW_TEST_SKIP` names `strace`) and root for the tmpfs cases (a
//! printed skip without).
//! `FERROCLAW_FAULT_SEED=N` picks other points, `FERROCLAW_FAULT_KILLS=N`
//! tries more kills: `FERROCLAW_FAULT_KILLS=200 cargo test -p ferroclaw-cli
//! --test e2e -- faults::`.

mod disk;
mod files;
mod harness;
mod kills;
mod provider;
