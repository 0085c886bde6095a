//! The step and task state machines.
//!
//! Every change of a step's state in every store goes through [`StepState::on`], so the rules
//! live in one place and are tested once, here.
//!
//! ```text
//!            claim               reply: done
//!  Pending ──────────► Processing ─────────────► Processed
//!     ▲  ▲                │  │  │
//!     │  └── expire/      │  │  └── reply: permanent error, or expire/release at the threshold ──► Error
//!     │      release      │  │                                                                      │
//!     │      (below the   │  └── cancel ──► Cancelled ◄── cancel (from Pending too)                 │
//!     │      threshold)   │                                                                         │
//!     └───────────────────┴──────────────────────── resubmit (by an operator) ◄─────────────────────┘
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The state of a step (P13, with Cancelled from C1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// Waiting to be claimed once it is due.
    Pending,
    /// Claimed by a scheduler, which must reply before complete-by.
    Processing,
    /// Done; its output is recorded.
    Processed,
    /// Failed for good (a permanent error, or too many expiries); an operator was alerted and may resubmit it.
    Error,
    /// Stopped because its task was cancelled.
    Cancelled,
}

/// Something that happens to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepEvent {
    /// A scheduler claims the step.
    Claim,
    /// The agent replied with a result before complete-by.
    Complete,
    /// The agent replied with an error that will not pass.
    PermanentError,
    /// The lease lapsed (the supervisor found complete-by passed) or its holder restarted;
    /// `give_up` is true when the failure count reached the retry policy's threshold.
    Expire {
        /// True when the step goes to Error rather than back to Pending.
        give_up: bool,
    },
    /// The agent replied that this attempt failed (a retry job's handler failure, M5); `give_up`
    /// is true when the retry policy has no try left.
    Fail {
        /// True when the step goes to Error rather than back to Pending.
        give_up: bool,
    },
    /// The agent handed the step back unfinished, to be claimed again after a delay (Conductor's
    /// IN_PROGRESS with `callbackAfterSeconds`): no failure is counted; `give_up` is true when the
    /// delay would end at or past the step's total timeout.
    Postpone {
        /// True when the step goes to Error rather than back to Pending.
        give_up: bool,
    },
    /// A due attempt waited past its claim timeout with no claim (the supervisor's sweep);
    /// `give_up` as for an expiry.
    ClaimTimeout {
        /// True when the step goes to Error rather than waiting for its next attempt.
        give_up: bool,
    },
    /// An operator sends a failed step back to run again.
    Resubmit,
    /// The step's task is cancelled.
    Cancel,
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a step in state {from} cannot take {event:?}")]
pub struct InvalidTransition {
    /// The state the step was in.
    pub from: StepState,
    /// What was asked of it.
    pub event: StepEvent,
}

impl StepState {
    pub const ALL: [StepState; 5] =
        [StepState::Pending, StepState::Processing, StepState::Processed, StepState::Error, StepState::Cancelled];

    /// The state after `event`, or why it cannot happen.
    pub fn on(self, event: StepEvent) -> Result<StepState, InvalidTransition> {
        use StepEvent as E;
        use StepState as S;
        let next = match (self, event) {
            (S::Pending, E::Claim) => S::Processing,
            (S::Processing, E::Complete) => S::Processed,
            (S::Processing, E::PermanentError) => S::Error,
            (S::Processing, E::Expire { give_up: false }) => S::Pending,
            (S::Processing, E::Expire { give_up: true }) => S::Error,
            (S::Processing, E::Fail { give_up: false }) => S::Pending,
            (S::Processing, E::Fail { give_up: true }) => S::Error,
            (S::Processing, E::Postpone { give_up: false }) => S::Pending,
            (S::Processing, E::Postpone { give_up: true }) => S::Error,
            (S::Pending, E::ClaimTimeout { give_up: false }) => S::Pending,
            (S::Pending, E::ClaimTimeout { give_up: true }) => S::Error,
            (S::Error, E::Resubmit) => S::Pending,
            (S::Pending | S::Processing, E::Cancel) => S::Cancelled,
            (from, event) => return Err(InvalidTransition { from, event }),
        };
        Ok(next)
    }

    /// True when nothing but an operator can move the step again.
    pub fn is_settled(self) -> bool {
        matches!(self, StepState::Processed | StepState::Error | StepState::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::Processing => "processing",
            StepState::Processed => "processed",
            StepState::Error => "error",
            StepState::Cancelled => "cancelled",
        }
    }
}

/// The state of a task as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Some step is pending or processing.
    Running,
    /// Held by an operator: no new step is scheduled or claimed until it is resumed.
    Paused,
    /// It failed or was cancelled, and the compensations of its completed steps are running (P7).
    Compensating,
    /// Every step is processed.
    Completed,
    /// A step (or a compensation) is in Error; an operator can retry it, which sets the task
    /// running again.
    Failed,
    /// Cancelled by an operator.
    Cancelled,
    /// Every compensation has run: the task's effects are undone.
    Compensated,
    /// Ended by an operator at once, without compensation.
    Terminated,
}

impl TaskState {
    pub const ALL: [TaskState; 8] = [
        TaskState::Running,
        TaskState::Paused,
        TaskState::Compensating,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Cancelled,
        TaskState::Compensated,
        TaskState::Terminated,
    ];

    /// True when the task will not move unless an operator acts.
    pub fn is_terminal(self) -> bool {
        !matches!(self, TaskState::Running | TaskState::Paused | TaskState::Compensating)
    }

    /// True when the decider moves the task on (its steps run).
    pub fn is_active(self) -> bool {
        matches!(self, TaskState::Running | TaskState::Compensating)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Running => "running",
            TaskState::Paused => "paused",
            TaskState::Compensating => "compensating",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
            TaskState::Compensated => "compensated",
            TaskState::Terminated => "terminated",
        }
    }
}

/// A state name that is not one of ours (from a database row or user input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown state {0:?}")]
pub struct UnknownState(pub String);

macro_rules! str_impls {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl FromStr for $t {
            type Err = UnknownState;
            fn from_str(s: &str) -> Result<Self, UnknownState> {
                <$t>::ALL.into_iter().find(|x| x.as_str() == s).ok_or_else(|| UnknownState(s.to_owned()))
            }
        }
    };
}
str_impls!(StepState);
str_impls!(TaskState);

#[cfg(test)]
mod tests {
    use super::*;
    use StepEvent as E;
    use StepState as S;
    use proptest::prelude::*;

    fn events() -> impl Strategy<Value = StepEvent> {
        prop_oneof![
            Just(E::Claim),
            Just(E::Complete),
            Just(E::PermanentError),
            Just(E::Expire { give_up: false }),
            Just(E::Expire { give_up: true }),
            Just(E::Fail { give_up: false }),
            Just(E::Fail { give_up: true }),
            Just(E::Postpone { give_up: false }),
            Just(E::Postpone { give_up: true }),
            Just(E::ClaimTimeout { give_up: false }),
            Just(E::ClaimTimeout { give_up: true }),
            Just(E::Resubmit),
            Just(E::Cancel),
        ]
    }

    #[test]
    fn the_happy_path() {
        let s = S::Pending.on(E::Claim).unwrap();
        assert_eq!(s, S::Processing);
        assert_eq!(s.on(E::Complete).unwrap(), S::Processed);
    }

    #[test]
    fn expiry_returns_to_pending_or_gives_up() {
        assert_eq!(S::Processing.on(E::Expire { give_up: false }).unwrap(), S::Pending);
        assert_eq!(S::Processing.on(E::Expire { give_up: true }).unwrap(), S::Error);
    }

    #[test]
    fn only_a_pending_step_times_out_waiting_for_a_claim() {
        for s in S::ALL {
            assert_eq!(s.on(E::ClaimTimeout { give_up: true }).is_ok(), s == S::Pending, "{s}");
        }
        assert_eq!(S::Pending.on(E::ClaimTimeout { give_up: false }).unwrap(), S::Pending);
        assert_eq!(S::Pending.on(E::ClaimTimeout { give_up: true }).unwrap(), S::Error);
    }

    #[test]
    fn only_processing_steps_take_replies() {
        for s in S::ALL {
            let ok = s == S::Processing;
            assert_eq!(s.on(E::Complete).is_ok(), ok, "{s}");
            assert_eq!(s.on(E::PermanentError).is_ok(), ok, "{s}");
            assert_eq!(s.on(E::Expire { give_up: false }).is_ok(), ok, "{s}");
            assert_eq!(s.on(E::Postpone { give_up: false }).is_ok(), ok, "{s}");
        }
        assert_eq!(S::Processing.on(E::Postpone { give_up: false }).unwrap(), S::Pending);
        assert_eq!(S::Processing.on(E::Postpone { give_up: true }).unwrap(), S::Error);
    }

    #[test]
    fn only_errors_are_resubmitted_and_settled_steps_are_not_cancelled() {
        for s in S::ALL {
            assert_eq!(s.on(E::Resubmit).is_ok(), s == S::Error, "{s}");
            assert_eq!(s.on(E::Cancel).is_ok(), !s.is_settled(), "{s}");
        }
    }

    #[test]
    fn names_round_trip() {
        for s in S::ALL {
            assert_eq!(s.as_str().parse::<S>().unwrap(), s);
        }
        for t in TaskState::ALL {
            assert_eq!(t.as_str().parse::<TaskState>().unwrap(), t);
        }
        assert!("done".parse::<S>().is_err());
        assert_eq!(format!("{:<11}|", S::Error), "error      |");
    }

    proptest! {
        /// Whatever happens, a Processed or Cancelled step never moves again, and a step reaches
        /// Processed only straight from Processing.
        #[test]
        fn processed_and_cancelled_are_final(evs in proptest::collection::vec(events(), 0..40)) {
            let mut s = S::Pending;
            for e in evs {
                match s.on(e) {
                    Ok(next) => {
                        prop_assert!(!matches!(s, S::Processed | S::Cancelled));
                        if next == S::Processed { prop_assert_eq!(s, S::Processing); }
                        s = next;
                    }
                    Err(err) => prop_assert_eq!(err.from, s),
                }
            }
        }
    }
}
