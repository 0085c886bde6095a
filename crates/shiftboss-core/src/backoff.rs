//! The in-call backoff of an agent runtime (P4): between attempts at a remote call that failed for
//! a passing reason, within one claim's complete-by.

use std::time::Duration;

/// Exponential backoff with "full jitter": each wait is random in [0, min(cap, base * 2^n)].
/// Full jitter spreads retries of many steps apart, so that a recovering service is not hit by
/// all of them at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The ceiling of the first wait; it doubles with each further failed attempt.
    pub base: Duration,
    /// The highest ceiling, however many attempts failed.
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base: Duration::from_millis(20), cap: Duration::from_secs(2) }
    }
}

impl Backoff {
    /// The wait before attempt `attempt + 1`, after `attempt` failed attempts (1 for the first).
    /// `random` is in [0, 1).
    pub fn delay(&self, attempt: u32, random: f64) -> Duration {
        let exp = 2f64.powi(attempt.saturating_sub(1).min(60) as i32);
        let ceiling = (self.base.as_secs_f64() * exp).min(self.cap.as_secs_f64());
        Duration::from_secs_f64(ceiling * random.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_until_the_cap_and_stays_within_it() {
        let b = Backoff { base: Duration::from_millis(10), cap: Duration::from_millis(100) };
        assert_eq!(b.delay(1, 1.0), Duration::from_millis(10));
        assert_eq!(b.delay(3, 1.0), Duration::from_millis(40));
        assert_eq!(b.delay(30, 1.0), Duration::from_millis(100));
        assert_eq!(b.delay(3, 0.0), Duration::ZERO);
        assert!(b.delay(u32::MAX, 0.5) <= Duration::from_millis(100));
    }
}
