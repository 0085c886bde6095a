//! How many steps the scheduler runs at once when the concurrency is left to adapt (issue 22).
//!
//! A fixed limit is wrong one way or the other: 64 steps at once leaves a backlog of fast steps
//! waiting on round trips that 2,048 would have shared, while 2,048 calls at once can swamp a slow
//! service. So the limit starts at the floor and doubles while steps are due faster than they run
//! (the last claim took every step it asked for) and the agents' calls take no longer than they did
//! at the floor; it falls back by a quarter when they do take longer (the service slows down under
//! the load), and to the floor when the scheduler has nothing to do. It never leaves the bounds, and
//! the store's per-agent limits still bound each agent type on top of it.
//!
//! A change is judged on the calls that ended since the last change, and only once half as many as
//! the limit have ended: a slow agent therefore grows the limit once per call time, never before its
//! calls have been seen.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Calls within this much of twice the floor's call time count as unchanged: sub-millisecond
/// agents (in-process work, a service on loopback) jitter by more than their own time when the
/// machine is busy, and that is no reason to slow down.
const SLACK: Duration = Duration::from_millis(10);

/// The agents' call times since the last look, written by the running steps.
#[derive(Debug, Default)]
pub struct CallClock {
    micros: AtomicU64,
    calls: AtomicU64,
}

impl CallClock {
    pub fn note(&self, took: Duration) {
        self.micros.fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The mean call time since the last take, and starts a new window.
    fn take(&self) -> Option<Duration> {
        let calls = self.calls.swap(0, Ordering::Relaxed);
        let micros = self.micros.swap(0, Ordering::Relaxed);
        (calls > 0).then(|| Duration::from_micros(micros / calls))
    }
}

#[derive(Debug)]
pub struct SlotLimit {
    floor: usize,
    ceiling: usize,
    now: usize,
    /// The agents' mean call time at the floor: what "taking longer" is measured against.
    baseline: Option<Duration>,
}

impl SlotLimit {
    /// Between `floor` and `ceiling` (a floor above the ceiling is the ceiling: a fixed limit).
    pub fn new(floor: usize, ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        let floor = floor.clamp(1, ceiling);
        SlotLimit { floor, ceiling, now: floor, baseline: None }
    }

    pub fn now(&self) -> usize {
        self.now
    }

    /// After a look for work. `backlog`: the claim took every step it asked for, or there were no
    /// free slots to ask with while the last claim was full. `idle`: nothing was claimed and
    /// nothing runs.
    pub fn adjust(&mut self, backlog: bool, idle: bool, calls: &CallClock) {
        if self.floor == self.ceiling {
            return;
        }
        if idle {
            if self.now != self.floor {
                tracing::debug!(limit = self.floor, "no work: the slot limit falls back to its floor");
            }
            self.now = self.floor;
            // Judged afresh at the floor next time, so a service that became slower for good is
            // not held against its old time for ever.
            self.baseline = None;
            calls.take();
            return;
        }
        if calls.calls() < (self.now / 2).max(1) as u64 {
            return;
        }
        let Some(mean) = calls.take() else { return };
        let Some(baseline) = self.baseline else {
            self.baseline = Some(mean);
            if backlog {
                self.grow();
            }
            return;
        };
        if mean > baseline * 2 + SLACK {
            let lower = (self.now * 3 / 4).max(self.floor);
            if lower != self.now {
                tracing::debug!(
                    limit = lower,
                    mean_ms = mean.as_secs_f64() * 1e3,
                    "agents slow down: the slot limit falls"
                );
            }
            self.now = lower;
        } else {
            if self.now == self.floor {
                self.baseline = Some(baseline.min(mean));
            }
            if backlog {
                self.grow();
            }
        }
    }

    fn grow(&mut self) {
        let higher = (self.now * 2).min(self.ceiling);
        if higher != self.now {
            tracing::debug!(limit = higher, "steps are due faster than they run: the slot limit grows");
        }
        self.now = higher;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(n: usize, each: Duration) -> CallClock {
        let c = CallClock::default();
        for _ in 0..n {
            c.note(each);
        }
        c
    }

    #[test]
    fn a_backlog_of_fast_calls_doubles_the_limit_up_to_the_ceiling() {
        let mut l = SlotLimit::new(64, 2048);
        let mut seen = vec![l.now()];
        while l.now() < 2048 {
            let c = calls(l.now(), Duration::from_micros(50));
            l.adjust(true, false, &c);
            seen.push(l.now());
            assert!(seen.len() < 10, "never reached the ceiling: {seen:?}");
        }
        assert_eq!(seen, [64, 128, 256, 512, 1024, 2048]);
        l.adjust(true, false, &calls(2048, Duration::from_micros(50)));
        assert_eq!(l.now(), 2048, "held at the ceiling");
    }

    #[test]
    fn nothing_changes_before_half_the_limit_of_calls_have_ended() {
        let mut l = SlotLimit::new(64, 2048);
        l.adjust(true, false, &calls(31, Duration::from_micros(50)));
        assert_eq!(l.now(), 64);
        l.adjust(true, false, &calls(32, Duration::from_micros(50)));
        assert_eq!(l.now(), 128);
    }

    #[test]
    fn without_a_backlog_the_limit_holds() {
        let mut l = SlotLimit::new(64, 2048);
        l.adjust(false, false, &calls(64, Duration::from_millis(1)));
        assert_eq!(l.now(), 64);
    }

    #[test]
    fn calls_that_take_longer_under_load_bring_the_limit_down_to_no_less_than_the_floor() {
        let mut l = SlotLimit::new(64, 2048);
        for _ in 0..3 {
            l.adjust(true, false, &calls(l.now(), Duration::from_millis(20)));
        }
        assert_eq!(l.now(), 512);
        // 20 ms at the floor; 2 x 20 + 10 = 50 ms is still "unchanged", 51 is slower.
        l.adjust(true, false, &calls(512, Duration::from_millis(50)));
        assert_eq!(l.now(), 1024);
        l.adjust(true, false, &calls(1024, Duration::from_millis(51)));
        assert_eq!(l.now(), 768);
        for _ in 0..20 {
            l.adjust(true, false, &calls(l.now(), Duration::from_millis(200)));
        }
        assert_eq!(l.now(), 64);
    }

    #[test]
    fn an_idle_scheduler_falls_back_to_the_floor_and_judges_afresh() {
        let mut l = SlotLimit::new(64, 2048);
        l.adjust(true, false, &calls(64, Duration::from_millis(1)));
        l.adjust(true, false, &calls(128, Duration::from_millis(1)));
        assert_eq!(l.now(), 256);
        l.adjust(false, true, &CallClock::default());
        assert_eq!(l.now(), 64);
        // The service is slower now, for good: the new time is the new baseline, not a slowdown.
        l.adjust(true, false, &calls(64, Duration::from_millis(100)));
        assert_eq!(l.now(), 128);
    }

    #[test]
    fn a_floor_at_the_ceiling_is_a_fixed_limit() {
        let mut l = SlotLimit::new(64, 16);
        assert_eq!(l.now(), 16);
        l.adjust(true, false, &calls(16, Duration::from_micros(1)));
        assert_eq!(l.now(), 16);
    }
}
