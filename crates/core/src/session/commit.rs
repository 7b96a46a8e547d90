//! Group commit: session files are made durable at turn boundaries by a few
//! syncer threads, not by each turn on its own. A turn that ends hands its
//! file to [`GroupCommit::commit`] and waits (asynchronously: no async worker
//! thread blocks on the disk). An idle syncer takes everything pending as one
//! batch, syncs each distinct file in it once, and wakes every waiter of that
//! file with the result; while it syncs, the next batch gathers for another
//! syncer. So a gateway where many chats end turns at once is not bound by
//! one fsync per message on its async threads, and a turn is never reported
//! done before its bytes are on disk.
//!
//! Each file is synced with `fdatasync` ([`File::sync_data`]): session files
//! are only appended to, and `fdatasync` flushes the data and the file size
//! (what reading the lines back needs) but not the modification time, which
//! saves a metadata write per sync. A batch sees only bytes written before
//! its waiters were queued, so a waiter is released by a sync that began
//! after its write.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use tokio::sync::oneshot;

/// Syncer threads of the process. Two are enough to keep one batch gathering
/// while another syncs; on the 2-core machine the targets were measured on,
/// syncs of distinct files in parallel gained little over that (the disk
/// queue is the limit).
pub const SYNCER_THREADS: usize = 2;

/// Stack of a syncer thread: it only calls `fdatasync` and sends results.
const SYNCER_STACK_BYTES: usize = 64 * 1024;

/// How a file is made durable (replaced in tests to count or fail syncs).
type SyncFn = dyn Fn(&File) -> io::Result<()> + Send + Sync;

/// The process's group committer and its syncer threads.
pub struct GroupCommit {
    inner: Arc<Inner>,
}

struct Inner {
    pending: Mutex<Vec<Waiter>>,
    wake: Condvar,
    sync: Box<SyncFn>,
    /// Syncs done since start (each distinct file of each batch counts once).
    syncs: AtomicU64,
}

/// A file waiting to be synced, and who to tell.
struct Waiter {
    file: Arc<File>,
    done: oneshot::Sender<io::Result<()>>,
}

impl GroupCommit {
    /// The process's group committer; its threads start on first use.
    pub fn global() -> &'static GroupCommit {
        static GLOBAL: OnceLock<GroupCommit> = OnceLock::new();
        GLOBAL.get_or_init(|| GroupCommit::start(SYNCER_THREADS, Box::new(File::sync_data)))
    }

    /// A committer with `threads` syncers making files durable with `sync`.
    fn start(threads: usize, sync: Box<SyncFn>) -> GroupCommit {
        let inner = Arc::new(Inner {
            pending: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            sync,
            syncs: AtomicU64::new(0),
        });
        for n in 0..threads.max(1) {
            let inner = inner.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("session-sync-{n}"))
                .stack_size(SYNCER_STACK_BYTES)
                .spawn(move || inner.run());
            if let Err(e) = spawned {
                // Commits still complete while at least one syncer runs;
                // with none, each waiter gets an error (see `commit`).
                tracing::error!("cannot start a session syncer thread: {e}");
            }
        }
        GroupCommit { inner }
    }

    /// Makes everything written to `file` so far durable; resolves once a
    /// sync that began after this call has finished, with its result.
    pub fn commit(&self, file: Arc<File>) -> impl Future<Output = io::Result<()>> + use<> {
        let (done, rx) = oneshot::channel();
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Waiter { file, done });
        self.inner.wake.notify_one();
        async move { rx.await.unwrap_or_else(|_| Err(io::Error::other("the session syncer stopped"))) }
    }

    /// Syncs done since the committer started.
    pub fn syncs(&self) -> u64 {
        self.inner.syncs.load(Ordering::Relaxed)
    }
}

impl Inner {
    /// A syncer: takes the whole pending batch, syncs each distinct file once.
    fn run(&self) {
        loop {
            let batch = {
                let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                while pending.is_empty() {
                    pending = self.wake.wait(pending).unwrap_or_else(PoisonError::into_inner);
                }
                std::mem::take(&mut *pending)
            };
            self.sync_batch(batch);
        }
    }

    fn sync_batch(&self, mut batch: Vec<Waiter>) {
        // Waiters of one file side by side, so each file is synced once.
        batch.sort_by_key(|w| Arc::as_ptr(&w.file) as usize);
        let mut last: Option<(Arc<File>, io::Result<()>)> = None;
        let mut answers = Vec::with_capacity(batch.len());
        for Waiter { file, done } in batch {
            let synced = last.as_ref().is_some_and(|(last, _)| Arc::ptr_eq(last, &file));
            if !synced {
                let result = (self.sync)(&file);
                self.syncs.fetch_add(1, Ordering::Relaxed);
                last = Some((file, result));
            }
            let result = match last.as_ref().map(|(_, r)| r) {
                Some(Err(e)) => Err(io::Error::new(e.kind(), e.to_string())),
                _ => Ok(()),
            };
            answers.push((done, result));
        }
        // Every handle is let go before anyone hears back: a session closed
        // right after its commit is closed (its lock released) at once, so
        // reopening it never finds it "in use".
        drop(last);
        for (done, result) in answers {
            // A waiter that went away (its turn was dropped) needs no answer.
            let _ = done.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::sync::mpsc;

    /// Syncs recorded in order (by file descriptor), a gate holding the first
    /// sync until the test has queued everything, and files whose sync fails.
    struct Recorder {
        done: Mutex<Vec<i32>>,
        gate: Mutex<Option<mpsc::Receiver<()>>>,
        failing: Mutex<Vec<i32>>,
    }

    fn committer(threads: usize) -> (GroupCommit, Arc<Recorder>, mpsc::Sender<()>) {
        let (open, gate) = mpsc::channel();
        let recorder = Arc::new(Recorder {
            done: Mutex::default(),
            gate: Mutex::new(Some(gate)),
            failing: Mutex::default(),
        });
        let r = recorder.clone();
        let sync = move |file: &File| {
            if let Some(gate) = r.gate.lock().unwrap().take() {
                gate.recv().unwrap();
            }
            let fd = file.as_raw_fd();
            let result = if r.failing.lock().unwrap().contains(&fd) {
                Err(io::Error::other("disk full"))
            } else {
                file.sync_data()
            };
            r.done.lock().unwrap().push(fd);
            result
        };
        (GroupCommit::start(threads, Box::new(sync)), recorder, open)
    }

    fn pending(gc: &GroupCommit) -> usize {
        gc.inner.pending.lock().unwrap().len()
    }

    fn files(dir: &tempfile::TempDir, n: usize) -> Vec<Arc<File>> {
        (0..n)
            .map(|i| {
                let path = dir.path().join(format!("{i}.jsonl"));
                Arc::new(File::options().create(true).append(true).open(path).unwrap())
            })
            .collect()
    }

    /// Waits (without a time limit that could flake) until `n` waiters are queued.
    fn until_pending(gc: &GroupCommit, n: usize) {
        while pending(gc) < n {
            std::thread::yield_now();
        }
    }

    #[tokio::test]
    async fn many_turn_ends_at_once_share_one_sync_per_file_and_wait_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let (gc, recorder, open) = committer(1);
        let files = files(&dir, 20);
        // A first commit occupies the only syncer (held at the gate)...
        let first = gc.commit(files[0].clone());
        while gc.syncs() == 0 && pending(&gc) > 0 {
            std::thread::yield_now();
        }
        // ...while 60 turn ends (three per file) pile up behind it.
        let mut turns = Vec::new();
        for round in 0..3 {
            for file in &files {
                (&**file).write_all(format!("{{\"round\":{round}}}\n").as_bytes()).unwrap();
                let synced_before = recorder.done.lock().unwrap().len();
                let fd = file.as_raw_fd();
                let commit = gc.commit(file.clone());
                let r = recorder.clone();
                turns.push(tokio::spawn(async move {
                    commit.await.unwrap();
                    // Released only once a sync of its own file finished after it was queued.
                    let done = r.done.lock().unwrap();
                    assert!(done[synced_before..].contains(&fd), "released before its sync");
                }));
            }
        }
        until_pending(&gc, 60);
        open.send(()).unwrap();
        first.await.unwrap();
        for turn in turns {
            turn.await.unwrap();
        }
        let done = recorder.done.lock().unwrap().clone();
        let mut per_file: HashMap<i32, usize> = HashMap::new();
        for fd in &done[1..] {
            *per_file.entry(*fd).or_default() += 1;
        }
        assert_eq!(per_file.len(), 20);
        assert!(per_file.values().all(|n| *n == 1), "one sync per file per batch: {per_file:?}");
        assert_eq!(gc.syncs(), 21);
    }

    #[tokio::test]
    async fn a_failing_sync_is_an_error_for_that_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let (gc, recorder, open) = committer(2);
        let files = files(&dir, 3);
        recorder.failing.lock().unwrap().push(files[1].as_raw_fd());
        let commits: Vec<_> = files.iter().map(|f| gc.commit(f.clone())).collect();
        open.send(()).unwrap();
        let mut results = Vec::new();
        for commit in commits {
            results.push(commit.await.map_err(|e| e.to_string()));
        }
        assert_eq!(results, vec![Ok(()), Err("disk full".to_string()), Ok(())]);
    }

    #[tokio::test]
    async fn the_process_committer_makes_a_file_durable() {
        let dir = tempfile::tempdir().unwrap();
        let file = files(&dir, 1).remove(0);
        (&*file).write_all(b"{}\n").unwrap();
        let before = GroupCommit::global().syncs();
        GroupCommit::global().commit(file).await.unwrap();
        assert!(GroupCommit::global().syncs() > before);
    }
}
