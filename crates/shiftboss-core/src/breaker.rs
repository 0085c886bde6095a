//! A circuit breaker (P20): after enough failures in a row, calls to a service fail fast for a
//! while instead of adding load to a service that is down; then one probe decides whether it is back.
//!
//! Time is passed in, so the breaker is a plain value that tests drive without a clock.

use crate::time::Timestamp;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    /// Failures in a row that open the breaker.
    pub failure_threshold: u32,
    /// How long it stays open before it lets one probe through.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig { failure_threshold: 5, open_for: Duration::from_millis(500) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through.
    Closed {
        /// Transient failures in a row so far; reaching the threshold opens the breaker.
        failures: u32,
    },
    /// Calls fail fast; the first caller at or after `until` is let through as the probe.
    Open {
        /// When a probe may go.
        until: Timestamp,
    },
    /// One probe is out; other calls wait until it reports.
    HalfOpen,
}

/// What a caller may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Call the service.
    Call,
    /// Call the service as the probe; report the result.
    Probe,
    /// Do not call; try again at this time at the earliest.
    Wait {
        /// When to ask again.
        until: Timestamp,
    },
}

#[derive(Debug, Clone)]
pub struct CircuitBreaker {
    config: BreakerConfig,
    state: BreakerState,
}

impl CircuitBreaker {
    pub fn new(config: BreakerConfig) -> Self {
        CircuitBreaker { config, state: BreakerState::Closed { failures: 0 } }
    }

    pub fn state(&self) -> BreakerState {
        self.state
    }

    pub fn admit(&mut self, now: Timestamp) -> Admission {
        match self.state {
            BreakerState::Closed { .. } => Admission::Call,
            BreakerState::Open { until } if now >= until => {
                self.state = BreakerState::HalfOpen;
                Admission::Probe
            }
            BreakerState::Open { until } => Admission::Wait { until },
            // The probe is out; others look again a little later.
            BreakerState::HalfOpen => Admission::Wait { until: now.plus(self.config.open_for / 4) },
        }
    }

    pub fn on_success(&mut self) {
        self.state = BreakerState::Closed { failures: 0 };
    }

    /// A failure that says the service is unwell (a transient fault). Permanent errors are answers,
    /// not outages, and should be reported with [`CircuitBreaker::on_success`].
    pub fn on_failure(&mut self, now: Timestamp) {
        let open = BreakerState::Open { until: now.plus(self.config.open_for) };
        self.state = match self.state {
            BreakerState::Closed { failures } if failures + 1 >= self.config.failure_threshold => open,
            BreakerState::Closed { failures } => BreakerState::Closed { failures: failures + 1 },
            BreakerState::HalfOpen | BreakerState::Open { .. } => open,
        };
    }

    /// A probe that ended without an answer (dropped at complete-by): let another probe through.
    pub fn on_abandoned(&mut self) {
        if self.state == BreakerState::HalfOpen {
            self.state = BreakerState::Open { until: Timestamp(0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> CircuitBreaker {
        CircuitBreaker::new(BreakerConfig { failure_threshold: 3, open_for: Duration::from_secs(10) })
    }

    #[test]
    fn opens_after_the_threshold_and_probes_after_the_wait() {
        let mut b = breaker();
        let t0 = Timestamp(1_000_000);
        for _ in 0..2 {
            assert_eq!(b.admit(t0), Admission::Call);
            b.on_failure(t0);
        }
        assert_eq!(b.admit(t0), Admission::Call);
        b.on_failure(t0);
        let until = t0.plus(Duration::from_secs(10));
        assert_eq!(b.admit(t0), Admission::Wait { until });
        assert_eq!(b.admit(until), Admission::Probe);
        assert!(matches!(b.admit(until), Admission::Wait { .. }), "only one probe at a time");
        b.on_success();
        assert_eq!(b.admit(until), Admission::Call);
    }

    #[test]
    fn a_failed_probe_opens_it_again_and_a_success_resets_the_count() {
        let mut b = breaker();
        let t0 = Timestamp(0);
        b.on_failure(t0);
        b.on_failure(t0);
        b.on_success();
        b.on_failure(t0);
        assert_eq!(b.admit(t0), Admission::Call, "the count restarted after a success");
        for _ in 0..3 {
            b.on_failure(t0);
        }
        let t1 = t0.plus(Duration::from_secs(10));
        assert_eq!(b.admit(t1), Admission::Probe);
        b.on_failure(t1);
        assert_eq!(b.admit(t1), Admission::Wait { until: t1.plus(Duration::from_secs(10)) });
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_one_through() {
        let mut b = breaker();
        for _ in 0..3 {
            b.on_failure(Timestamp(0));
        }
        assert_eq!(b.admit(Timestamp(20_000)), Admission::Probe);
        b.on_abandoned();
        assert_eq!(b.admit(Timestamp(20_001)), Admission::Probe);
    }
}
