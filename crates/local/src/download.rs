//! Downloads a model file: resumes an interrupted download with an HTTP
//! `Range` request, verifies the SHA-256, and lands the file atomically
//! (the bytes accumulate in `NAME.gguf.part`, renamed when verified).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::store::partial_path;

/// Time allowed to connect to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest silence in the middle of a download before it counts as broken.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Progress of a download: bytes on disk so far and the total, when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub done: u64,
    pub total: Option<u64>,
    /// Bytes that were already on disk from an earlier attempt.
    pub resumed_from: u64,
}

/// What a finished download produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    pub path: PathBuf,
    pub size: u64,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
    /// True when the file's checksum was compared with a known one.
    pub verified: bool,
}

/// Everything that can go wrong downloading.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("cannot reach {url}: {message}")]
    Connect { url: String, message: String },
    #[error("{url}: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error(
        "download of {url} was interrupted after {done} bytes ({message}); run the same command again to resume"
    )]
    Interrupted { url: String, done: u64, message: String },
    #[error(
        "checksum mismatch for {url}: expected sha256 {expected}, got {actual}; the file was deleted"
    )]
    ChecksumMismatch { url: String, expected: String, actual: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Downloads `url` to `dest`, resuming `dest.part` if present, checking
/// `sha256` when given. `progress` is called as bytes arrive.
pub async fn download(
    url: &str,
    dest: &Path,
    sha256: Option<&str>,
    mut progress: impl FnMut(Progress),
) -> Result<Downloaded, DownloadError> {
    let part = partial_path(dest);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DownloadError::Io { path, source }
    };
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let mut have = std::fs::metadata(&part).map_or(0, |m| m.len());
    let client =
        client().map_err(|message| DownloadError::Connect { url: url.to_string(), message })?;
    let mut request = client.get(url);
    if have > 0 {
        request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let mut response = request.send().await.map_err(|e| DownloadError::Connect {
        url: url.to_string(),
        // reqwest repeats the URL the message already names.
        message: describe(&e).replace(&format!("error sending request for url ({url}): "), ""),
    })?;
    let status = response.status().as_u16();
    let append = match status {
        206 => true,
        200 => {
            // The server ignored the range: start over.
            have = 0;
            false
        }
        // Nothing left to fetch: the partial file is already whole.
        416 if have > 0 => true,
        _ => {
            return Err(DownloadError::Status { url: url.to_string(), status });
        }
    };
    let total =
        if status == 416 { Some(have) } else { response.content_length().map(|n| n + have) };
    let mut hasher = Sha256::new();
    if append {
        hash_file(&part, &mut hasher).map_err(io(&part))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(&part)
        .map_err(io(&part))?;
    let resumed_from = have;
    let mut done = have;
    progress(Progress { done, total, resumed_from });
    if status != 416 {
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    let _ = file.flush();
                    return Err(DownloadError::Interrupted {
                        url: url.to_string(),
                        done,
                        message: describe(&e),
                    });
                }
            };
            file.write_all(&chunk).map_err(io(&part))?;
            hasher.update(&chunk);
            done += chunk.len() as u64;
            progress(Progress { done, total, resumed_from });
        }
    }
    file.sync_all().map_err(io(&part))?;
    drop(file);
    if let Some(t) = total
        && done < t
    {
        return Err(DownloadError::Interrupted {
            url: url.to_string(),
            done,
            message: format!("the server sent {done} of {t} bytes"),
        });
    }
    let actual = hex(&hasher.finalize());
    if let Some(expected) = sha256
        && !expected.eq_ignore_ascii_case(&actual)
    {
        let _ = std::fs::remove_file(&part);
        return Err(DownloadError::ChecksumMismatch {
            url: url.to_string(),
            expected: expected.to_lowercase(),
            actual,
        });
    }
    std::fs::rename(&part, dest).map_err(io(dest))?;
    Ok(Downloaded {
        path: dest.to_path_buf(),
        size: done,
        sha256: actual,
        verified: sha256.is_some(),
    })
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    hash_file(path, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

fn hash_file(path: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An HTTP client with rustls on ring, following redirects (the model hub
/// redirects to a CDN).
fn client() -> Result<reqwest::Client, String> {
    // Ignore the error: another crate or an earlier call installed one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .user_agent(concat!("ferroclaw/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .build()
        .map_err(|e| describe(&e))
}

/// An error with its causes, which reqwest keeps in `source()`.
fn describe(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
