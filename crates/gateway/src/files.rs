//! Small JSON state files shared between the gateway and the CLI: read
//! whole, written atomically (a temp file in the same folder, then rename).
//! Everything the gateway writes under `$FERROCLAW_HOME` is private to its
//! owner: files 0600, folders 0700 (pairing codes, tokens and chats are there).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Mode of the files the gateway writes.
pub const FILE_MODE: u32 = 0o600;
/// Mode of the folders the gateway creates.
pub const DIR_MODE: u32 = 0o700;

/// Reads a JSON file; a missing file is the default value.
pub fn read_json<T: DeserializeOwned + Default>(path: &Path) -> Result<T, String> {
    match own_file::read(path, MAX_STATE_FILE_BYTES) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("not valid JSON: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(e.to_string()),
    }
}

/// Creates `dir` (and missing parents) as 0700, and makes an existing `dir` 0700.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
}

/// Opens `path` for writing as a 0600 file (created, or truncated with `append` false).
pub fn open_private(path: &Path, append: bool) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .mode(FILE_MODE)
        .open(path)?;
    // A file created earlier with a wider mode is narrowed.
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Writes `value` as pretty JSON so that readers see the old or the new file, never half of one.
pub fn write_json_atomically<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().ok_or("no parent folder")?;
    create_private_dir(dir).map_err(|e| e.to_string())?;
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| e.to_string())?;
    text.push(b'\n');
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("state"),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let write = || -> std::io::Result<()> {
        let mut file = open_private(&tmp, false)?;
        file.write_all(&text)?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        e.to_string()
    })
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `len` bytes from the operating system's random source (`getrandom(2)`),
/// for tokens and pairing codes; never a seeded, predictable generator.
pub fn os_random(len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        // SAFETY: the pointer and length describe the unfilled part of `buf`.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), len - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(buf)
}

/// A random token: `bytes` bytes from [`os_random`], as hex.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    Ok(os_random(bytes)?.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redteam_gateway_state_files_are_0600_in_0700_folders() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("pairing/telegram.json");
        write_json_atomically(&path, &serde_json::json!({"a": 1})).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn redteam_gateway_tokens_come_from_the_os_random_source_and_differ() {
        let a = random_hex(24).unwrap();
        let b = random_hex(24).unwrap();
        assert_eq!(a.len(), 48);
        assert_ne!(a, b);
    }
}
