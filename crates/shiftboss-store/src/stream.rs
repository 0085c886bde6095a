//! Reading the event log as a stream: every event after a cursor, in id order, with filters, such
//! that a reader that goes on from the last event it saw misses nothing and repeats nothing.
//!
//! The catch is that ids are handed out before commit: on PostgreSQL two transactions commit in
//! either order, so an event with a smaller id can become visible after one with a larger id. A
//! store therefore only returns events that are *settled*: no event with a smaller id can still
//! commit. How a store knows that is its own business (SQLite's one writer commits in id order;
//! PostgreSQL waits out the transactions that were running, see ARCHITECTURE.md, "Event
//! streams"); what it needs to remember between reads travels in the cursor.

use crate::StoreError;
use crate::listing::MAX_EVENT_PAGE;
use crate::params::MAX_TASK_KEY_LEN;
use shiftboss_core::TaskId;
use shiftboss_core::model::EventRecord;

/// Which events: every filter given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this task's events.
    pub task_id: Option<TaskId>,
    /// Only events of tasks of this workflow (any version).
    pub workflow: Option<String>,
    /// Only events of these kinds (`step.processed`, ...); every kind when empty.
    pub kinds: Vec<String>,
    /// Only events of tasks whose key starts with this text (compared as bytes).
    pub key_prefix: Option<String>,
}

/// The most kinds one filter names.
pub const MAX_EVENT_KINDS: usize = 64;

impl EventFilter {
    pub fn validate(&self) -> Result<(), StoreError> {
        if let Some(p) = &self.key_prefix
            && (p.len() > MAX_TASK_KEY_LEN || p.chars().any(char::is_control))
        {
            return Err(StoreError::InvalidInput(format!(
                "a key prefix must be at most {MAX_TASK_KEY_LEN} bytes with no control characters"
            )));
        }
        if self.workflow.as_ref().is_some_and(|w| w.len() > 1000 || w.contains('\0')) {
            return Err(StoreError::InvalidInput("workflow: at most 1000 bytes, no NUL".into()));
        }
        if self.kinds.len() > MAX_EVENT_KINDS || self.kinds.iter().any(|k| k.len() > 100 || k.contains('\0')) {
            return Err(StoreError::InvalidInput(format!(
                "kinds: at most {MAX_EVENT_KINDS}, each at most 100 bytes with no NUL"
            )));
        }
        Ok(())
    }

    /// The key range the prefix stands for (see [`crate::TaskFilter::key_range`]).
    pub fn key_range(&self) -> Option<(&str, Option<String>)> {
        let p = self.key_prefix.as_deref().filter(|p| !p.is_empty())?;
        Some((p, crate::listing::prefix_upper_bound(p)))
    }
}

/// Where a reader stands: every settled event up to `after` has been read (those the filter
/// matches returned). Start at [`EventCursor::after`] with the last event id a reader saw (0 for
/// the beginning); then pass back the cursor each read returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCursor {
    /// Every settled event with an id up to this one has been read.
    pub after: i64,
    /// Every id up to this one is known to be settled (it may be ahead of `after` when a read
    /// stopped at its page size).
    pub settled: i64,
    /// What the store needs to know which later events are settled (PostgreSQL: the highest id
    /// handed out when the fence was taken, and a transaction id above every one given out
    /// before). Opaque to callers.
    pub fence: Option<EventFence>,
}

impl EventCursor {
    /// A cursor after the event with this id (0: from the first event).
    pub fn after(id: i64) -> Self {
        EventCursor { after: id.max(0), settled: 0, fence: None }
    }

    /// A cursor for the events written from now on: its first read returns nothing and moves it
    /// after the highest id handed out so far.
    pub fn latest() -> Self {
        EventCursor { after: LATEST, settled: 0, fence: None }
    }
}

/// The `after` of [`EventCursor::latest`].
pub const LATEST: i64 = i64::MAX;

/// A store's note of which ids will be settled once the transactions running when it was taken
/// have ended: every id up to `id`, once none of the transactions below `horizon` runs
/// (PostgreSQL's transaction ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventFence {
    pub id: i64,
    pub horizon: i64,
}

/// Read the settled events after a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadEvents {
    pub cursor: EventCursor,
    pub filter: EventFilter,
    /// At most this many events (1 to [`MAX_EVENT_PAGE`]).
    pub limit: u32,
}

/// The most ids one read looks through: a filter that matches rarely still reads a bounded range,
/// and the cursor moves past what was looked through.
pub const MAX_EVENT_SCAN: i64 = 10_000;

impl ReadEvents {
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.limit == 0 || self.limit > MAX_EVENT_PAGE {
            return Err(StoreError::InvalidInput(format!("limit: 1 to {MAX_EVENT_PAGE} events per read")));
        }
        self.filter.validate()
    }
}

/// An event with the task it belongs to, as a stream shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    pub event: EventRecord,
    pub task_key: String,
    pub workflow: String,
    /// The name of the step it is about, if it is about one.
    pub step: Option<String>,
}

/// What a read found.
#[derive(Debug, Clone, PartialEq)]
pub struct EventsRead {
    /// Settled events after the cursor that match the filter, in id order.
    pub events: Vec<StreamEvent>,
    /// Where to read from next.
    pub cursor: EventCursor,
    /// True when more may be read at once: the page was full, the read stopped at its scan bound,
    /// or events exist that are not settled yet (a transaction that wrote one is still running,
    /// and nothing will announce its end: read again shortly).
    pub again: bool,
}

/// The id range a read looks through, from its cursor to the settled horizon, bounded by
/// [`MAX_EVENT_SCAN`].
pub fn scan_end(after: i64, horizon: i64) -> i64 {
    horizon.min(after.saturating_add(MAX_EVENT_SCAN))
}

/// Where a read that looked through `(after, end]` leaves the cursor: after its last event when
/// the page filled (the rest of the range is read next), else at `end` (everything up to it was
/// looked through). True when the page filled, so that more may be read at once.
pub fn advance(after: i64, end: i64, events: &[StreamEvent], limit: u32) -> (i64, bool) {
    match events.last() {
        Some(last) if events.len() >= limit as usize => (last.event.id.max(after), true),
        _ => (end.max(after), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_is_bounded_and_the_cursor_never_goes_back() {
        assert_eq!(scan_end(5, 7), 7);
        assert_eq!(scan_end(5, i64::MAX), 5 + MAX_EVENT_SCAN);
        assert_eq!(advance(5, 9, &[], 10), (9, false));
        assert_eq!(advance(9, 3, &[], 10), (9, false), "a horizon behind the cursor does not move it back");
        let f = EventFilter { kinds: vec!["k".into(); MAX_EVENT_KINDS + 1], ..EventFilter::default() };
        assert!(f.validate().is_err());
        let bad = ReadEvents { cursor: EventCursor::after(0), filter: EventFilter::default(), limit: 0 };
        assert!(bad.validate().is_err());
    }
}
