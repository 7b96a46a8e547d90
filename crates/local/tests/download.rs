//! Model downloads against a local HTTP server serving a fixture file:
//! whole, interrupted then resumed with `Range`, and with a bad checksum.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use ferroclaw_local::download::{DownloadError, download, sha256_file};

/// A fixture: a fake GGUF of 300 000 bytes.
fn fixture() -> Vec<u8> {
    let mut data = b"GGUF".to_vec();
    data.extend((0..300_000u32 - 4).map(|i| (i * 7 % 251) as u8));
    data
}

/// A one-file HTTP server. `cut_first_at`: the first response announces the
/// whole length but closes after this many bytes.
struct Server {
    url: String,
    /// The `Range` header of each request, in order.
    ranges: Arc<Mutex<Vec<Option<String>>>>,
}

impl Server {
    fn start(body: Vec<u8>, cut_first_at: Option<usize>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/model.gguf", listener.local_addr().unwrap());
        let ranges = Arc::new(Mutex::new(Vec::new()));
        let seen = ranges.clone();
        std::thread::spawn(move || {
            let mut cut = cut_first_at;
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let range = serve(stream, &body, cut.take());
                seen.lock().unwrap().push(range);
            }
        });
        Server { url, ranges }
    }

    fn ranges(&self) -> Vec<Option<String>> {
        self.ranges.lock().unwrap().clone()
    }
}

/// Answers one request; returns its `Range` header.
fn serve(mut stream: TcpStream, body: &[u8], cut: Option<usize>) -> Option<String> {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_string());
        }
    }
    let start: usize = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.trim_end_matches('-').parse().ok())
        .unwrap_or(0);
    let rest = &body[start.min(body.len())..];
    let head = if start > 0 {
        format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{}\r\nConnection: close\r\n\r\n",
            rest.len(),
            body.len() - 1,
            body.len()
        )
    } else {
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", rest.len())
    };
    let _ = stream.write_all(head.as_bytes());
    let sent = cut.map_or(rest.len(), |c| c.min(rest.len()));
    let _ = stream.write_all(&rest[..sent]);
    let _ = stream.flush();
    let mut sink = [0u8; 1];
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(10)));
    let _ = stream.read(&mut sink);
    range
}

fn sha(data: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x");
    std::fs::write(&p, data).unwrap();
    sha256_file(&p).unwrap()
}

#[tokio::test]
async fn a_whole_download_is_verified_and_lands_atomically() {
    let body = fixture();
    let server = Server::start(body.clone(), None);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("models/m.gguf");
    let mut last = None;
    let got = download(&server.url, &dest, Some(&sha(&body)), |p| last = Some(p)).await.unwrap();
    assert!(got.verified);
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert!(!dir.path().join("models/m.gguf.part").exists());
    let last = last.unwrap();
    assert_eq!((last.done, last.total), (300_000, Some(300_000)));
}

#[tokio::test]
async fn an_interrupted_download_resumes_with_a_range_request() {
    let body = fixture();
    let server = Server::start(body.clone(), Some(120_000));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("m.gguf");
    let err = download(&server.url, &dest, Some(&sha(&body)), |_| {}).await.unwrap_err();
    assert!(matches!(err, DownloadError::Interrupted { .. }), "{err}");
    assert!(err.to_string().contains("again to resume"), "{err}");
    assert!(!dest.exists(), "no half file under the final name");
    let part = std::fs::metadata(dir.path().join("m.gguf.part")).unwrap().len();
    assert!(part > 0 && part <= 120_000, "{part}");

    let mut first = None;
    let got = download(&server.url, &dest, Some(&sha(&body)), |p| {
        first.get_or_insert(p);
    })
    .await
    .unwrap();
    assert_eq!(first.unwrap().resumed_from, part);
    assert_eq!(got.sha256, sha(&body));
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert_eq!(server.ranges()[1], Some(format!("bytes={part}-")));
}

#[tokio::test]
async fn a_checksum_mismatch_is_an_error_and_leaves_nothing_behind() {
    let body = fixture();
    let server = Server::start(body, None);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("m.gguf");
    let wrong = "0".repeat(64);
    let err = download(&server.url, &dest, Some(&wrong), |_| {}).await.unwrap_err();
    let DownloadError::ChecksumMismatch { expected, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(expected, &wrong);
    assert!(!dest.exists());
    assert!(!dir.path().join("m.gguf.part").exists());
}

#[tokio::test]
async fn without_a_known_checksum_the_digest_is_reported_unverified() {
    let body = fixture();
    let server = Server::start(body.clone(), None);
    let dir = tempfile::tempdir().unwrap();
    let got = download(&server.url, &dir.path().join("m.gguf"), None, |_| {}).await.unwrap();
    assert!(!got.verified);
    assert_eq!(got.sha256, sha(&body));
}

#[tokio::test]
async fn a_missing_file_is_an_http_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/nope.gguf", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let mut s = s;
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let err = download(&url, &dir.path().join("m.gguf"), None, |_| {}).await.unwrap_err();
    assert!(matches!(err, DownloadError::Status { status: 404, .. }), "{err}");
}
