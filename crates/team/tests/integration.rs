//! The integration tests of this crate, one test binary (a binary a file
//! would link the crate and its dependencies again for each: disk and link
//! time in CI). One file's tests: `cargo test --test integration -- FILE::`.

mod board;
mod inbox_stress;
mod tools;
