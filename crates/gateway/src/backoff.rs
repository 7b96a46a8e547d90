//! The wait between tries at something unreachable (a chat platform, the
//! shared database): doubling from a first wait up to a cap with each
//! failure, back to no wait once it answers. One type for Telegram's polls,
//! Discord's and Slack's reconnections and the scale-out store loops.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Failures since the last success, and the waits they earn.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// No failure yet; the first wait is `first`, none longer than `max`.
    pub(crate) const fn new(first: Duration, max: Duration) -> Self {
        Self { first, max, failures: 0 }
    }

    /// True when nothing failed since the last success (to log a run of
    /// failures once, and the recovery once).
    pub(crate) fn fresh(&self) -> bool {
        self.failures == 0
    }

    /// Failures since the last success.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// A success: the next failure waits `first` again.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }

    /// Counts one more failure.
    pub(crate) fn fail(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }

    /// The wait before the next try: none when fresh, else `first` doubled
    /// for each failure after the first, at most `max`.
    pub(crate) fn delay(&self) -> Duration {
        match self.failures {
            0 => Duration::ZERO,
            n => self.first.saturating_mul(1 << (n - 1).min(16)).min(self.max),
        }
    }

    /// Sleeps [`Self::delay`], or until `stop`.
    pub(crate) async fn sleep(&self, stop: &CancellationToken) {
        let delay = self.delay();
        if delay.is_zero() {
            return;
        }
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(delay) => {}
        }
    }

    /// Counts a failure and sleeps the wait it earns (or until `stop`).
    pub(crate) async fn wait(&mut self, stop: &CancellationToken) {
        self.fail();
        self.sleep(stop).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_the_first_up_to_the_cap_and_reset_on_success() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        assert!(backoff.fresh());
        assert_eq!(backoff.delay(), Duration::ZERO);
        let waits: Vec<u64> = (0..8)
            .map(|_| {
                backoff.fail();
                backoff.delay().as_secs()
            })
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        for _ in 0..100 {
            backoff.fail();
        }
        assert_eq!(backoff.delay(), Duration::from_secs(60));
        backoff.reset();
        assert!(backoff.fresh());
        backoff.fail();
        assert_eq!(backoff.delay(), Duration::from_secs(1));
    }
}
