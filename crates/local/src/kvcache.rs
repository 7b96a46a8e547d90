//! The KV state of a prompt's fixed prefix (system prompt and tools), saved
//! across processes so that a new `ferroclaw -p` reads only the user's
//! message. Files live in `$FERROCLAW_HOME/cache/kv/`, one per prefix, named
//! by a hash of the model file's SHA-256, the llama.cpp build and the
//! prefix's tokens, so a changed model, engine or prompt never matches an
//! old file. The model's SHA-256 is remembered by path, size and
//! modification time (hashing a multi-GB file on every start would cost
//! more than it saves). The folder is capped in size; the least recently
//! used files go first.
//!
//! A file is checked before llama.cpp reads it, since llama.cpp aborts the
//! process on some malformed files (a truncated one trips an assertion):
//! beside each `KEY.kv` a `KEY.sum` holds its size and SHA-256, written after
//! the state file is complete. Then llama.cpp's own header check and the
//! token list (compared with the prefix wanted) must pass too. A file that
//! fails any check is deleted and rebuilt, never trusted.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// The folder under `$FERROCLAW_HOME`.
pub const KV_CACHE_DIR: &str = "cache/kv";

/// Default cap on the folder: a 1,000-token prefix of SmolLM2-135M is
/// ~23 MB, of a 1.7B model ~200 MB; 1 GB keeps a few models' prefixes.
pub const DEFAULT_CAP_BYTES: u64 = 1 << 30;

/// The llama.cpp build the engine links: part of every key, because a state
/// file written by one build need not load in another. Bump with the
/// `llama-cpp-2` dependency.
pub const LLAMA_BUILD: &str = "llama-cpp-2 0.1.160";

/// Extension of state files.
const STATE_EXT: &str = "kv";
/// Extension of their checksum files.
const SUM_EXT: &str = "sum";

/// The saved prefixes of one model.
#[derive(Debug, Clone)]
pub struct PrefixCache {
    dir: PathBuf,
    cap_bytes: u64,
    model_sha256: String,
}

impl PrefixCache {
    /// The cache for `model` in `dir`, capped at `cap_bytes`. Hashes the
    /// model file unless its hash is remembered.
    pub fn open(dir: &Path, model: &Path, cap_bytes: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let model_sha256 = model_sha256(dir, model)?;
        Ok(Self { dir: dir.to_path_buf(), cap_bytes, model_sha256 })
    }

    /// The file for a prefix of token ids.
    pub fn path_for(&self, prefix: &[i32]) -> PathBuf {
        let mut h = Sha256::new();
        h.update(self.model_sha256.as_bytes());
        h.update([0]);
        h.update(LLAMA_BUILD.as_bytes());
        h.update([0]);
        for t in prefix {
            h.update(t.to_le_bytes());
        }
        self.dir.join(format!("{}.{STATE_EXT}", &hex(&h.finalize())[..32]))
    }

    /// A temporary name beside `path` to write to before renaming.
    pub fn temp_path(path: &Path) -> PathBuf {
        path.with_extension(format!("{STATE_EXT}.tmp-{}", std::process::id()))
    }

    /// Records the size and SHA-256 of a complete state file beside it.
    pub fn seal(path: &Path) -> std::io::Result<()> {
        let (len, sum) = file_sha256(path)?;
        let sum_path = path.with_extension(SUM_EXT);
        let tmp = sum_path.with_extension(format!("{SUM_EXT}.tmp-{}", std::process::id()));
        std::fs::write(&tmp, format!("{len} {sum}\n"))?;
        std::fs::rename(&tmp, &sum_path)
    }

    /// Checks a state file against its recorded size and SHA-256.
    pub fn check(path: &Path) -> Result<(), String> {
        let recorded = std::fs::read_to_string(path.with_extension(SUM_EXT))
            .map_err(|e| format!("no checksum: {e}"))?;
        let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
        let mut fields = recorded.split_whitespace();
        if fields.next() != Some(len.to_string().as_str()) {
            return Err(format!("size {len} differs from the recorded one ({})", recorded.trim()));
        }
        let (_, sum) = file_sha256(path).map_err(|e| e.to_string())?;
        if fields.next() != Some(sum.as_str()) {
            return Err("checksum mismatch".into());
        }
        Ok(())
    }

    /// Deletes a state file and its checksum.
    pub fn remove(path: &Path) {
        let _ = std::fs::remove_file(path.with_extension(SUM_EXT));
        let _ = std::fs::remove_file(path);
    }

    /// Marks `path` as just used (its modification time orders eviction).
    pub fn touch(path: &Path) {
        if let Ok(f) = std::fs::File::options().append(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
    }

    /// Deletes the least recently used state files until the folder is
    /// under the cap; returns how many were deleted.
    pub fn evict(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == STATE_EXT))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().unwrap_or(UNIX_EPOCH), m.len(), e.path()))
            })
            .collect();
        files.sort();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        let mut deleted = 0;
        for (_, len, path) in files {
            if total <= self.cap_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                let _ = std::fs::remove_file(path.with_extension(SUM_EXT));
                tracing::debug!("local: evicted prompt state {}", path.display());
                total -= len;
                deleted += 1;
            }
        }
        deleted
    }
}

/// The SHA-256 of `model`, remembered in `dir/models/` under a name made of
/// the file's canonical path, size and modification time.
pub fn model_sha256(dir: &Path, model: &Path) -> std::io::Result<String> {
    let path = model.canonicalize()?;
    let meta = std::fs::metadata(&path)?;
    let mtime = meta.modified()?.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let identity = format!("{}\0{}\0{mtime}", path.display(), meta.len());
    let memo = dir.join("models").join(&hex(&Sha256::digest(identity.as_bytes()))[..32]);
    if let Ok(text) = std::fs::read_to_string(&memo) {
        let text = text.trim();
        if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(text.to_string());
        }
    }
    let (_, sum) = file_sha256(&path)?;
    std::fs::create_dir_all(memo.parent().unwrap_or(dir))?;
    let tmp = memo.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, &sum)?;
    std::fs::rename(&tmp, &memo)?;
    Ok(sum)
}

/// A file's length and SHA-256 (hex).
fn file_sha256(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        len += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((len, hex(&hasher.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_hash_is_remembered_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"GGUF one").unwrap();
        let cache = dir.path().join("kv");
        let first = model_sha256(&cache, &model).unwrap();
        assert_eq!(first, hex(&Sha256::digest(b"GGUF one")));
        // A remembered hash is used as is (here: planted to prove it).
        let memo = std::fs::read_dir(cache.join("models")).unwrap().next().unwrap().unwrap();
        std::fs::write(memo.path(), "a".repeat(64)).unwrap();
        assert_eq!(model_sha256(&cache, &model).unwrap(), "a".repeat(64));
        // A changed file (new size) is hashed again.
        std::fs::write(&model, b"GGUF two!").unwrap();
        assert_eq!(model_sha256(&cache, &model).unwrap(), hex(&Sha256::digest(b"GGUF two!")));
    }

    #[test]
    fn a_sealed_file_passes_its_check_and_a_truncated_or_altered_one_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.kv");
        assert!(PrefixCache::check(&path).is_err(), "missing");
        std::fs::write(&path, b"state bytes").unwrap();
        assert!(PrefixCache::check(&path).unwrap_err().contains("no checksum"));
        PrefixCache::seal(&path).unwrap();
        assert_eq!(PrefixCache::check(&path), Ok(()));
        std::fs::write(&path, b"state").unwrap();
        assert!(PrefixCache::check(&path).unwrap_err().contains("size"));
        std::fs::write(&path, b"STATE bytes").unwrap();
        assert_eq!(PrefixCache::check(&path), Err("checksum mismatch".into()));
        PrefixCache::remove(&path);
        assert!(!path.exists() && !path.with_extension("sum").exists());
    }

    #[test]
    fn keys_differ_by_prefix_and_by_model() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
        std::fs::write(&a, b"GGUF a").unwrap();
        std::fs::write(&b, b"GGUF b").unwrap();
        let kv = dir.path().join("kv");
        let ca = PrefixCache::open(&kv, &a, DEFAULT_CAP_BYTES).unwrap();
        let cb = PrefixCache::open(&kv, &b, DEFAULT_CAP_BYTES).unwrap();
        assert_eq!(ca.path_for(&[1, 2, 3]), ca.path_for(&[1, 2, 3]));
        assert_ne!(ca.path_for(&[1, 2, 3]), ca.path_for(&[1, 2, 4]));
        assert_ne!(ca.path_for(&[1, 2, 3]), cb.path_for(&[1, 2, 3]));
    }

    #[test]
    fn eviction_removes_the_least_recently_used_files_down_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"GGUF").unwrap();
        let kv = dir.path().join("kv");
        let cache = PrefixCache::open(&kv, &model, 250).unwrap();
        let now = SystemTime::now();
        for (i, name) in ["old", "mid", "new"].iter().enumerate() {
            let p = kv.join(format!("{name}.kv"));
            std::fs::write(&p, [0u8; 100]).unwrap();
            let f = std::fs::File::options().append(true).open(&p).unwrap();
            f.set_modified(now - std::time::Duration::from_secs(100 - i as u64 * 10)).unwrap();
        }
        PrefixCache::touch(&kv.join("old.kv"));
        assert_eq!(cache.evict(), 1);
        assert!(kv.join("old.kv").exists(), "touched: most recently used");
        assert!(!kv.join("mid.kv").exists());
        assert!(kv.join("new.kv").exists());
        assert!(kv.join("models").is_dir(), "the hash memo is not a state file");
    }
}
