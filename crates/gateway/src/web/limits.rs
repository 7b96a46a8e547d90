//! What the web channel holds back from strangers on the network: sizes,
//! timeouts, caps, and the token buckets of its rate limits. Every request
//! is rate limited by address before anything else (so the token cannot be
//! guessed quickly), and the token is checked before a body is read.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Largest request body accepted (a long pasted document).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// How long a request body may take to arrive once the headers are in.
pub(super) const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest request head (request line and headers); larger ones get 431.
pub(super) const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Largest WebSocket message from a chat page (a long pasted text, or a
/// pasted image: a 5 MB picture is about 6.7 MB as base64).
pub(super) const MAX_WS_MESSAGE_BYTES: usize = 8 * 1024 * 1024;
/// Largest single WebSocket frame.
pub(super) const MAX_WS_FRAME_BYTES: usize = 256 * 1024;
/// How long a chat page's socket may stay silent (pages reconnect on their own).
pub(super) const WS_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Seconds a client is told to wait when a chat's queue is full.
pub(super) const BUSY_RETRY_AFTER_SECS: u64 = 2;
/// Seconds a client is told to wait while the gateway drains: about what a
/// restart takes (systemd's `RestartSec=5` plus the start).
pub(super) const DRAIN_RETRY_AFTER_SECS: u64 = 10;
/// Addresses remembered by a rate limiter before idle ones are forgotten.
const MAX_TRACKED_KEYS: usize = 10_000;

/// Token buckets by key (an address, a sender): each key may do `per_minute`
/// things a minute, in bursts of up to `per_minute`.
pub struct RateLimiter {
    per_minute: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    /// The key was refused since it last got through (to warn it only once).
    refused: bool,
}

/// What a rate limiter says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Allowed,
    /// Refused; try again in this many seconds. `first` is true for the first
    /// refusal since the key last got through.
    Limited {
        retry_after_secs: u64,
        first: bool,
    },
}

impl RateLimiter {
    /// A limiter of `per_minute` per key; 0 means no limit.
    pub fn new(per_minute: u32) -> Self {
        RateLimiter { per_minute, buckets: Mutex::default() }
    }

    /// Takes one token of `key`'s bucket.
    pub fn check(&self, key: &str) -> Rate {
        if self.per_minute == 0 {
            return Rate::Allowed;
        }
        let now = Instant::now();
        let capacity = f64::from(self.per_minute);
        let per_sec = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= MAX_TRACKED_KEYS && !buckets.contains_key(key) {
            // Forget the keys whose buckets are full again (they lose nothing).
            buckets.retain(|_, b| {
                b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec < capacity
            });
        }
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: capacity,
            at: now,
            refused: false,
        });
        bucket.tokens =
            (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * per_sec).min(capacity);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            bucket.refused = false;
            Rate::Allowed
        } else {
            let first = !bucket.refused;
            bucket.refused = true;
            let wait = ((1.0 - bucket.tokens) / per_sec).ceil().max(1.0);
            Rate::Limited { retry_after_secs: wait as u64, first }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_past_the_limit_is_refused_with_when_to_retry_and_others_go_on() {
        let limiter = RateLimiter::new(3);
        for _ in 0..3 {
            assert_eq!(limiter.check("a"), Rate::Allowed);
        }
        assert_eq!(limiter.check("a"), Rate::Limited { retry_after_secs: 20, first: true });
        assert!(matches!(limiter.check("a"), Rate::Limited { first: false, .. }));
        assert_eq!(limiter.check("b"), Rate::Allowed, "one key's flood does not limit another");
        assert_eq!(RateLimiter::new(0).check("a"), Rate::Allowed);
    }
}
