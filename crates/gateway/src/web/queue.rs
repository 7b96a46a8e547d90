//! What the gateway has queued for one client (a chat page's socket, a
//! streamed API answer), bounded in bytes: a client that stops reading while
//! the agent keeps writing is disconnected once [`MAX_QUEUED_BYTES`] wait for
//! it, instead of holding ever more memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Bytes that may wait for one client: far more than a turn's events for a
/// client that reads (a long answer is a few hundred KB of frames), little
/// next to the gateway's memory (64 chat pages at most).
pub const MAX_QUEUED_BYTES: usize = 4 * 1024 * 1024;

/// The sending side; cheap to clone.
#[derive(Clone)]
pub(super) struct OutQueue<T> {
    tx: mpsc::UnboundedSender<(usize, T)>,
    queued: Arc<AtomicUsize>,
    overflow: CancellationToken,
    limit: usize,
}

/// The receiving side, for the task that writes to the client.
pub(super) struct OutReceiver<T> {
    rx: mpsc::UnboundedReceiver<(usize, T)>,
    queued: Arc<AtomicUsize>,
    overflow: CancellationToken,
}

/// A queue holding at most `limit` bytes.
pub(super) fn out_queue<T>(limit: usize) -> (OutQueue<T>, OutReceiver<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let overflow = CancellationToken::new();
    let receiver = OutReceiver { rx, queued: queued.clone(), overflow: overflow.clone() };
    (OutQueue { tx, queued, overflow, limit }, receiver)
}

impl<T> OutQueue<T> {
    /// Queues `item` of `bytes`; false when the client is gone or has
    /// fallen too far behind (then it is disconnected: see [`OutReceiver::overflowed`]).
    pub(super) fn push(&self, item: T, bytes: usize) -> bool {
        if self.overflow.is_cancelled() {
            return false;
        }
        // One item always fits an empty queue (a long answer to a page
        // that reads); past that, the queue holds `limit` bytes.
        let before = self.queued.fetch_add(bytes, Ordering::AcqRel);
        if before > 0 && before + bytes > self.limit {
            self.overflow.cancel();
            return false;
        }
        self.tx.send((bytes, item)).is_ok()
    }

    /// Whether both are the same client's queue.
    pub(super) fn same_queue(&self, other: &Self) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// Resolves once the client has fallen too far behind.
    pub(super) async fn overflowed(&self) {
        self.overflow.cancelled().await;
    }
}

impl<T> OutReceiver<T> {
    /// The next item; `None` when every sender is gone or the queue overflowed.
    pub(super) async fn recv(&mut self) -> Option<T> {
        tokio::select! {
            biased;
            _ = self.overflow.cancelled() => None,
            item = self.rx.recv() => item.map(|(bytes, item)| {
                self.queued.fetch_sub(bytes, Ordering::AcqRel);
                item
            }),
        }
    }

    /// Resolves once the client has fallen too far behind (to abandon a
    /// write it is not reading).
    pub(super) async fn overflowed(&self) {
        self.overflow.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reader_that_keeps_up_gets_everything_and_one_that_stops_is_cut_off() {
        let (tx, mut rx) = out_queue::<u32>(100);
        for i in 0..1000 {
            assert!(tx.push(i, 60));
            assert_eq!(rx.recv().await, Some(i), "a reading client is never cut off");
        }
        assert!(tx.push(1, 60));
        assert!(!tx.push(2, 60), "120 bytes waiting is over the 100 allowed");
        assert_eq!(rx.recv().await, None, "the writer stops");
        assert!(!tx.push(3, 1), "and nothing more is queued");
    }

    #[tokio::test]
    async fn one_item_larger_than_the_limit_still_reaches_a_reading_client() {
        let (tx, mut rx) = out_queue::<&str>(100);
        assert!(tx.push("a long answer", 1000));
        assert_eq!(rx.recv().await, Some("a long answer"));
        assert!(tx.push("next", 10));
    }
}
