//! Typed ids, so that a step id is never passed where a task id belongs.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! int_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // Delegating keeps width and alignment flags working in tables.
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

int_id!(
    /// A task: one whole process, such as one order.
    TaskId
);
int_id!(
    /// A step: one unit of work in a task.
    StepId
);
int_id!(
    /// The fencing token of a claim. It grows with every claim of a step, so a write carrying an
    /// older token is from a claim that has since lapsed and must not be applied.
    LeaseToken
);

/// The instance (scheduler or supervisor process) that holds a claim: the step's LockedBy.
///
/// It must be stable across restarts of the same process, so that a restarted scheduler can find
/// the steps it held before it died.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InstanceId(String);

/// Why a string cannot be an instance id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid instance id {0:?}: use 1 to 128 visible ASCII characters, no spaces")]
pub struct InvalidInstanceId(pub String);

impl InstanceId {
    pub fn new(s: impl Into<String>) -> Result<Self, InvalidInstanceId> {
        let s = s.into();
        if s.is_empty() || s.len() > 128 || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(InvalidInstanceId(s));
        }
        Ok(InstanceId(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_are_checked() {
        assert!(InstanceId::new("sched-1@host").is_ok());
        assert!(InstanceId::new("").is_err());
        assert!(InstanceId::new("has space").is_err());
        assert!(InstanceId::new("x".repeat(129)).is_err());
    }

    #[test]
    fn ids_line_up_in_tables() {
        assert_eq!(format!("{:>5}|{:<4}|", TaskId(42), InstanceId::new("ab").unwrap()), "   42|ab  |");
    }
}
