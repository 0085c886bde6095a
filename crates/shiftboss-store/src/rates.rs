//! What the console's charts read of the whole deployment (issue 20): how many events of some
//! kinds the log gained between two reads. Every process's work is in the one log, so the figures
//! are the deployment's, not the reading process's. Event ids are the log's order: a read counts
//! the ids after the last read's end up to the newest. A transaction still running when the read
//! is made may commit an id below that end later; it is not counted (a chart, not an audit).

use crate::StoreError;

/// The widest stretch of ids one read counts (the newest ones): a reader that was away for long
/// does not scan the whole log.
pub const MAX_COUNTED_IDS: i64 = 2_000_000;
/// The most kinds one read counts.
pub const MAX_COUNTED_KINDS: usize = 32;

#[derive(Debug, Clone)]
pub struct CountEvents {
    /// The `upto` of the previous read; none for the first, which counts nothing.
    pub after: Option<i64>,
    /// The kinds counted (`step.processed`, ...).
    pub kinds: Vec<String>,
}

impl CountEvents {
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.kinds.is_empty() || self.kinds.len() > MAX_COUNTED_KINDS {
            return Err(StoreError::InvalidInput(format!("1 to {MAX_COUNTED_KINDS} event kinds")));
        }
        Ok(())
    }

    /// The ids counted: after `after` (or the last `MAX_COUNTED_IDS` before `upto`), up to `upto`.
    pub fn from(&self, upto: i64) -> i64 {
        self.after.unwrap_or(upto).max(upto.saturating_sub(MAX_COUNTED_IDS)).min(upto)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// The newest event id at the read: the next read's `after`.
    pub upto: i64,
    /// Per kind asked for, how many events of it the stretch holds (kinds with none left out).
    pub counts: Vec<(String, u64)>,
}

impl EventCounts {
    /// The count of one kind.
    pub fn of(&self, kind: &str) -> u64 {
        self.counts.iter().find(|(k, _)| k == kind).map_or(0, |(_, n)| *n)
    }
}
