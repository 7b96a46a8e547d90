//! The one bound on what the file tools (`read`, `edit`, `multi_edit`,
//! `write`'s check that a file is unchanged) take in: a file over
//! [`SandboxPolicy::max_file_bytes`](crate::SandboxPolicy) (config
//! `max_file_bytes`) is refused from its metadata, before a byte is read,
//! so a huge or sparse file costs nothing; and the one test of a binary
//! file (a NUL byte in its first 8 KB, as git decides), shared by every tool.
//! Non-regular files (FIFOs, devices) are refused when opened
//! ([`crate::Beneath::open_read`] opens without blocking).

use std::fs::File;
use std::io::Read;

use crate::ToolError;

/// The default of `max_file_bytes`: 64 MiB. Far above any source file, and
/// low enough that `edit` (which holds a file and its new version) stays
/// within a few hundred MB; larger files are for `bash` (`head`, `sed -n`,
/// `grep`), which streams.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// How much of a file is checked for NUL bytes to call it binary (as git does).
pub const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// The config key that sets the bound, named in every refusal.
const CONFIG_KEY: &str = "max_file_bytes";

/// True when `head` (a file's first bytes) says the file is binary: it has
/// a NUL byte in its first [`BINARY_SNIFF_BYTES`].
pub fn looks_binary(head: &[u8]) -> bool {
    head[..head.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// Refuses file `shown` of `len` bytes when it is over `max` bytes, naming
/// its size, the bound and the config key.
pub fn check_size(shown: &str, len: u64, max: u64) -> Result<(), ToolError> {
    if len <= max {
        return Ok(());
    }
    Err(ToolError::Failed(format!(
        "{shown} is {} ({len} bytes), over the {} limit of the file tools (config \
         `{CONFIG_KEY}`); look at parts of it with bash (head, sed -n, grep), or raise \
         `{CONFIG_KEY}`",
        human_size(len),
        human_size(max)
    )))
}

/// The refusal of a binary file by a tool that changes text (`tool`).
pub fn binary_refusal(shown: &str, tool: &str) -> ToolError {
    ToolError::Failed(format!(
        "{shown} looks like a binary file (it has a NUL byte in its first 8 KB); {tool} only \
         changes text files (use write to replace it whole)"
    ))
}

/// Reads all of `file` (file `shown`) if it is at most `max` bytes: the size
/// is checked from its metadata first, and reading stops past `max` should
/// the file grow meanwhile. The buffer is sized once, so memory is the
/// file's size, not twice it.
pub fn read_bounded(file: &mut File, shown: &str, max: u64) -> Result<Vec<u8>, ToolError> {
    let io = |e| ToolError::io(format!("cannot read {shown}"), e);
    let len = file.metadata().map_err(io)?.len();
    check_size(shown, len, max)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    check_size(shown, bytes.len() as u64, max)?;
    Ok(bytes)
}

/// `bytes` as a person reads a size: `1.0 GB`, `64 MB`, `12 KB`, `5 bytes`
/// (binary units).
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            let value = bytes as f64 / size as f64;
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{value:.1} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_bound_is_refused_naming_its_size_and_the_config_key() {
        let err = check_size("big.log", 3 << 30, DEFAULT_MAX_FILE_BYTES).unwrap_err().to_string();
        assert!(err.contains("big.log is 3 GB (3221225472 bytes)"), "{err}");
        assert!(err.contains("over the 64 MB limit"), "{err}");
        assert!(err.contains("`max_file_bytes`"), "{err}");
        assert!(check_size("ok", DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_FILE_BYTES).is_ok());
    }

    #[test]
    fn a_nul_in_the_first_8_kb_makes_a_file_binary() {
        assert!(looks_binary(b"text\0more"));
        assert!(!looks_binary(b"plain text\n"));
        let mut late = vec![b'a'; BINARY_SNIFF_BYTES];
        late.push(0);
        assert!(!looks_binary(&late));
    }
}
