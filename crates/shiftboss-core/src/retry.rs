//! Retry policies as data (P7, P17, M6): after a step's n-th failure, how long to wait before it
//! runs again, or whether to give up.

use crate::time::serde_duration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// When to run a step again after a failure, and when to give up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RetryPolicy {
    /// Wait `intervals[n-1]` after the n-th failure; give up after the last interval is used,
    /// or earlier when `max_failures` is reached.
    Intervals {
        /// The wait after each failure in turn: the first after the first failure, and so on.
        #[serde(with = "serde_duration::vec")]
        intervals: Vec<Duration>,
        /// The failure at which to give up, if before the list runs out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_failures: Option<u32>,
    },
    /// Wait the same `delay` after every failure; give up at `max_failures` (Conductor's FIXED).
    Fixed {
        /// The wait after every failure.
        #[serde(with = "serde_duration")]
        delay: Duration,
        /// The failure at which to give up (at least 1).
        max_failures: u32,
    },
    /// Wait `base * n` after the n-th failure, at most `cap`; give up at `max_failures`
    /// (Conductor's LINEAR_BACKOFF).
    Linear {
        /// The wait after the first failure, added again after each one.
        #[serde(with = "serde_duration")]
        base: Duration,
        /// The longest wait.
        #[serde(with = "serde_duration")]
        cap: Duration,
        /// The failure at which to give up (at least 1).
        max_failures: u32,
    },
    /// Wait `base * factor^(n-1)`, at most `cap`, spread by `jitter` (0.0 to 1.0, the share of
    /// the delay that is random); give up at `max_failures`.
    Exponential {
        /// The wait after the first failure.
        #[serde(with = "serde_duration")]
        base: Duration,
        /// What each wait is multiplied by (at least 1.0; 2.0 when absent).
        #[serde(default = "default_factor")]
        factor: f64,
        /// The longest wait, before jitter.
        #[serde(with = "serde_duration")]
        cap: Duration,
        /// The share of the wait taken off at random (0.0 to 1.0; 0.0 when absent).
        #[serde(default)]
        jitter: f64,
        /// The failure at which to give up (at least 1).
        max_failures: u32,
    },
}

fn default_factor() -> f64 {
    2.0
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Run again after this delay.
    RetryAfter(Duration),
    /// Stop: the step goes to Error and an operator is alerted.
    GiveUp,
}

/// A policy that makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPolicy {
    /// An interval list with no interval.
    #[error("an interval list needs at least one interval")]
    NoIntervals,
    /// A `max_failures` of 0: failures are counted from 1.
    #[error("max_failures must be at least 1")]
    ZeroMaxFailures,
    /// A factor below 1.0, or not a finite number.
    #[error("factor must be a finite number of at least 1.0")]
    BadFactor,
    /// A jitter outside 0.0 to 1.0.
    #[error("jitter must be between 0.0 and 1.0")]
    BadJitter,
    /// A cap smaller than the base wait.
    #[error("cap must not be smaller than base")]
    CapBelowBase,
}

impl Default for RetryPolicy {
    /// M6's default: 1 min, 5 min, 10 min, 30 min, 1 h, then give up.
    fn default() -> Self {
        RetryPolicy::Intervals {
            intervals: [60, 300, 600, 1800, 3600].map(Duration::from_secs).to_vec(),
            max_failures: None,
        }
    }
}

impl RetryPolicy {
    pub fn validate(&self) -> Result<(), InvalidPolicy> {
        match self {
            RetryPolicy::Intervals { intervals, max_failures } => {
                if intervals.is_empty() {
                    return Err(InvalidPolicy::NoIntervals);
                }
                if *max_failures == Some(0) {
                    return Err(InvalidPolicy::ZeroMaxFailures);
                }
            }
            RetryPolicy::Fixed { max_failures, .. } if *max_failures == 0 => {
                return Err(InvalidPolicy::ZeroMaxFailures);
            }
            RetryPolicy::Fixed { .. } => {}
            RetryPolicy::Linear { base, cap, max_failures } => {
                if *max_failures == 0 {
                    return Err(InvalidPolicy::ZeroMaxFailures);
                }
                if cap < base {
                    return Err(InvalidPolicy::CapBelowBase);
                }
            }
            RetryPolicy::Exponential { base, factor, cap, jitter, max_failures } => {
                if *max_failures == 0 {
                    return Err(InvalidPolicy::ZeroMaxFailures);
                }
                if !factor.is_finite() || *factor < 1.0 {
                    return Err(InvalidPolicy::BadFactor);
                }
                if !(0.0..=1.0).contains(jitter) {
                    return Err(InvalidPolicy::BadJitter);
                }
                if cap < base {
                    return Err(InvalidPolicy::CapBelowBase);
                }
            }
        }
        Ok(())
    }

    /// The decision after failure number `failure_count` (1 for the first failure).
    /// `random` is a number in [0, 1) that spreads jittered delays.
    pub fn after_failure(&self, failure_count: u32, random: f64) -> RetryDecision {
        let n = failure_count.max(1);
        match self {
            RetryPolicy::Intervals { intervals, max_failures } => {
                if max_failures.is_some_and(|m| n >= m) {
                    return RetryDecision::GiveUp;
                }
                match intervals.get(n as usize - 1) {
                    Some(d) => RetryDecision::RetryAfter(*d),
                    None => RetryDecision::GiveUp,
                }
            }
            RetryPolicy::Fixed { delay, max_failures } => {
                if n >= *max_failures {
                    return RetryDecision::GiveUp;
                }
                RetryDecision::RetryAfter(*delay)
            }
            RetryPolicy::Linear { base, cap, max_failures } => {
                if n >= *max_failures {
                    return RetryDecision::GiveUp;
                }
                RetryDecision::RetryAfter(base.saturating_mul(n).min(*cap))
            }
            RetryPolicy::Exponential { base, factor, cap, jitter, max_failures } => {
                if n >= *max_failures {
                    return RetryDecision::GiveUp;
                }
                let raw = base.as_secs_f64() * factor.powi((n - 1).min(1000) as i32);
                let capped = raw.min(cap.as_secs_f64());
                let random = random.clamp(0.0, 1.0);
                let spread = capped * (1.0 - jitter * random);
                RetryDecision::RetryAfter(Duration::from_secs_f64(spread.max(0.0)))
            }
        }
    }
}

/// The retry policies of a deployment: one per agent, and a default for the rest.
/// A step's own policy, when its definition has one, comes before both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicies {
    /// The policy of every agent not in `per_agent` (M6's interval list when absent).
    #[serde(default)]
    pub default: RetryPolicy,
    /// Policies by agent name, for steps whose row carries no policy of its own.
    #[serde(default)]
    pub per_agent: BTreeMap<String, RetryPolicy>,
}

impl RetryPolicies {
    /// The policy that applies to a step of `agent` whose own policy is `step_policy`.
    pub fn resolve<'a>(&'a self, agent: &str, step_policy: Option<&'a RetryPolicy>) -> &'a RetryPolicy {
        step_policy.or_else(|| self.per_agent.get(agent)).unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RetryDecision::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn fixed_and_linear_delays_give_up_at_max_failures() {
        let fixed = RetryPolicy::Fixed { delay: secs(5), max_failures: 3 };
        let got: Vec<_> = (1..=3).map(|n| fixed.after_failure(n, 0.9)).collect();
        assert_eq!(got, [RetryAfter(secs(5)), RetryAfter(secs(5)), GiveUp]);
        let linear = RetryPolicy::Linear { base: secs(2), cap: secs(5), max_failures: 5 };
        let got: Vec<_> = (1..=5).map(|n| linear.after_failure(n, 0.9)).collect();
        assert_eq!(got, [RetryAfter(secs(2)), RetryAfter(secs(4)), RetryAfter(secs(5)), RetryAfter(secs(5)), GiveUp]);
        assert_eq!(
            RetryPolicy::Fixed { delay: secs(1), max_failures: 0 }.validate(),
            Err(InvalidPolicy::ZeroMaxFailures)
        );
        let bad = RetryPolicy::Linear { base: secs(2), cap: secs(1), max_failures: 2 };
        assert_eq!(bad.validate(), Err(InvalidPolicy::CapBelowBase));
        let read: RetryPolicy =
            serde_json::from_str(r#"{"kind": "linear", "base": "1s", "cap": "1m", "max_failures": 4}"#).unwrap();
        assert_eq!(read, RetryPolicy::Linear { base: secs(1), cap: secs(60), max_failures: 4 });
    }

    #[test]
    fn the_default_interval_list_is_followed_to_the_letter() {
        let p = RetryPolicy::default();
        let got: Vec<_> = (1..=6).map(|n| p.after_failure(n, 0.5)).collect();
        assert_eq!(
            got,
            vec![
                RetryAfter(secs(60)),
                RetryAfter(secs(300)),
                RetryAfter(secs(600)),
                RetryAfter(secs(1800)),
                RetryAfter(secs(3600)),
                GiveUp
            ]
        );
    }

    #[test]
    fn max_failures_cuts_an_interval_list_short() {
        let p = RetryPolicy::Intervals { intervals: vec![secs(1); 10], max_failures: Some(3) };
        assert_eq!(p.after_failure(2, 0.0), RetryAfter(secs(1)));
        assert_eq!(p.after_failure(3, 0.0), GiveUp);
    }

    #[test]
    fn exponential_grows_caps_and_jitters_downwards() {
        let p = RetryPolicy::Exponential { base: secs(1), factor: 2.0, cap: secs(10), jitter: 0.0, max_failures: 8 };
        let got: Vec<_> = (1..=8).map(|n| p.after_failure(n, 0.9)).collect();
        assert_eq!(got[0], RetryAfter(secs(1)));
        assert_eq!(got[3], RetryAfter(secs(8)));
        assert_eq!(got[4], RetryAfter(secs(10)));
        assert_eq!(got[7], GiveUp);
        let j = RetryPolicy::Exponential { base: secs(4), factor: 2.0, cap: secs(100), jitter: 0.5, max_failures: 8 };
        assert_eq!(j.after_failure(1, 0.0), RetryAfter(secs(4)));
        assert_eq!(j.after_failure(1, 1.0), RetryAfter(secs(2)));
    }

    #[test]
    fn nonsense_policies_are_refused() {
        let bad = RetryPolicy::Intervals { intervals: vec![], max_failures: None };
        assert_eq!(bad.validate(), Err(InvalidPolicy::NoIntervals));
        let bad = RetryPolicy::Exponential { base: secs(5), factor: 2.0, cap: secs(1), jitter: 0.0, max_failures: 3 };
        assert_eq!(bad.validate(), Err(InvalidPolicy::CapBelowBase));
        assert!(RetryPolicy::default().validate().is_ok());
    }

    #[test]
    fn a_step_policy_beats_the_agent_policy_which_beats_the_default() {
        let mut ps = RetryPolicies::default();
        let agent = RetryPolicy::Intervals { intervals: vec![secs(2)], max_failures: None };
        let step = RetryPolicy::Intervals { intervals: vec![secs(3)], max_failures: None };
        ps.per_agent.insert("pay".into(), agent.clone());
        assert_eq!(ps.resolve("pay", Some(&step)), &step);
        assert_eq!(ps.resolve("pay", None), &agent);
        assert_eq!(ps.resolve("ship", None), &RetryPolicy::default());
    }

    #[test]
    fn policies_read_from_json() {
        let p: RetryPolicy = serde_json::from_str(r#"{"kind":"intervals","intervals":["100ms","2s",500]}"#).unwrap();
        assert_eq!(p.after_failure(2, 0.0), RetryAfter(secs(2)));
        assert_eq!(p.after_failure(3, 0.0), RetryAfter(Duration::from_millis(500)));
        assert!(serde_json::from_str::<RetryPolicy>(r#"{"kind":"sometimes"}"#).is_err());
    }
}
