//! Saying once per interval what keeps failing (issue 26): a role that cannot reach the store
//! tries again every fraction of a second, and a line per try would bury the log (the scheduler's
//! claims: five a second). The first failure is logged at once; then one line per interval says
//! how many were not; the first success after failures says it is over. Time is passed in.

use std::time::Duration;
use tokio::time::Instant;

/// How often a failure that goes on is logged again.
pub const EVERY: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    last: Option<Instant>,
    /// Failures since the last line.
    held: u64,
    /// Failures since the last success.
    failures: u64,
}

impl Throttle {
    pub const fn new(every: Duration) -> Throttle {
        Throttle { every, last: None, held: 0, failures: 0 }
    }

    /// A failure at `now`: `Some(n)` when a line is due, `n` being the failures not logged since
    /// the last line.
    pub fn failed(&mut self, now: Instant) -> Option<u64> {
        self.failures += 1;
        if self.last.is_some_and(|t| now < t + self.every) {
            self.held += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held))
    }

    /// A success: `Some(n)` when it ends a run of `n` failures.
    pub fn succeeded(&mut self) -> Option<u64> {
        self.last = None;
        self.held = 0;
        (self.failures > 0).then(|| std::mem::take(&mut self.failures))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_told_then_one_line_per_interval_then_the_end() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Duration::from_secs(10));
        assert_eq!(t.succeeded(), None, "no failures: nothing to say");
        assert_eq!(t.failed(t0), Some(0));
        for i in 1..50 {
            assert_eq!(t.failed(t0 + Duration::from_millis(200 * i)), None, "held within the interval");
        }
        assert_eq!(t.failed(t0 + Duration::from_secs(10)), Some(49), "49 held since the first line");
        assert_eq!(t.succeeded(), Some(51));
        assert_eq!(t.failed(t0 + Duration::from_secs(11)), Some(0), "a new run is told at once");
    }
}
