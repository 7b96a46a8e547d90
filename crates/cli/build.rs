//! Link-time settings of the `ferroclaw` binary.
//!
//! On Linux with glibc, the binary is linked with packed relative
//! relocations (`-z pack-relative-relocs`, DT_RELR): a position-independent
//! Rust binary has a few hundred thousand relative relocations (vtables,
//! string tables), which the classic format stores as 24 bytes each, and
//! every start-up reads them all: megabytes of the file paged in and time in
//! the dynamic loader on every run, however short. Packed, the table is a few
//! kilobytes. It needs GNU ld 2.38+ (or lld 15+) to link and glibc 2.36+ to
//! run; set `FERROCLAW_NO_RELR=1` to build for an older glibc.

fn main() {
    println!("cargo:rerun-if-env-changed=FERROCLAW_NO_RELR");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" && std::env::var_os("FERROCLAW_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
