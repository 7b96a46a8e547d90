//! The log of requests a server received, with the moment each response was fully written.

use std::{
    fs::File,
    io::Write,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Instant,
};

use serde_json::{Value, json};

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Path without the query, e.g. `/v1/messages`.
    pub path: String,
    /// Headers in arrival order, names lowercase.
    pub headers: Vec<(String, String)>,
    /// Parsed JSON body; `Null` when empty, a JSON string holding the raw text when not JSON.
    pub body: Value,
    /// When the request reached the handler.
    pub received_at: Instant,
    /// When the full response had been handed to the connection; `None` if it never was.
    pub finished_at: Option<Instant>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Shared request log, optionally mirrored to a JSON-lines file.
pub(crate) struct Recorder {
    started_at: Instant,
    /// Every request (`None` once written to the sink, when not kept).
    requests: Mutex<Vec<Option<RecordedRequest>>>,
    sink: Option<Mutex<File>>,
    /// Keep requests in memory for [`Recorder::snapshot`] (a server in a
    /// test); the `scripted-llm` binary only writes them to its sink, so a
    /// long benchmark neither grows without bound nor pays for copies.
    keep: bool,
}

impl Recorder {
    /// An empty log; `sink` receives one JSON line per request once its response ends.
    pub(crate) fn new(sink: Option<File>, keep: bool) -> Recorder {
        Recorder {
            started_at: Instant::now(),
            requests: Mutex::new(Vec::new()),
            sink: sink.map(Mutex::new),
            keep,
        }
    }

    /// True when recorded bodies are read: kept for a test, or written to a sink.
    pub(crate) fn wants_bodies(&self) -> bool {
        self.keep || self.sink.is_some()
    }

    /// Appends a request and returns a guard that completes its record.
    pub(crate) fn push(self: &Arc<Self>, request: RecordedRequest) -> Completion {
        let mut requests = lock(&self.requests);
        requests.push(Some(request));
        Completion { recorder: Arc::clone(self), index: requests.len() - 1 }
    }

    /// A copy of the log in arrival order.
    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).iter().flatten().cloned().collect()
    }

    fn write_line(&self, index: usize) {
        let request = {
            let mut requests = lock(&self.requests);
            let Some(slot) = requests.get_mut(index) else { return };
            if self.keep { slot.clone() } else { slot.take() }
        };
        let (Some(sink), Some(request)) = (&self.sink, request) else { return };
        let micros = |at: Instant| at.saturating_duration_since(self.started_at).as_micros() as u64;
        let line = json!({
            "method": request.method,
            "path": request.path,
            "body": request.body,
            "received_at": micros(request.received_at),
            "finished_at": request.finished_at.map(micros),
        });
        // A benchmark log that cannot be written is not worth failing the response over.
        let _ = lock(sink).write_all(format!("{line}\n").as_bytes());
    }
}

/// Completes one request's record: `finish` stamps `finished_at`; dropping writes the log line.
pub(crate) struct Completion {
    recorder: Arc<Recorder>,
    index: usize,
}

impl Completion {
    /// Marks the response as completely handed to the connection, now (first call wins).
    pub(crate) fn finish(&self) {
        let now = Instant::now();
        if let Some(Some(request)) = lock(&self.recorder.requests).get_mut(self.index) {
            request.finished_at.get_or_insert(now);
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.recorder.write_line(self.index);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
