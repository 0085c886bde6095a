//! Params of the reads that page: tasks by filter, newest first, and one task's events in order.

use crate::StoreError;
use crate::params::MAX_TASK_KEY_LEN;
use shiftboss_core::{TaskId, TaskState, Timestamp};

/// Which tasks: every filter given must match. Times are by the store's clock; each range takes
/// its `from` and leaves out its `to` (`from <= t < to`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks of this workflow (any version).
    pub workflow: Option<String>,
    /// Only tasks whose key starts with this text (compared as bytes, case sensitive).
    pub key_prefix: Option<String>,
    /// Submitted at or after this time.
    pub created_from: Option<Timestamp>,
    /// Submitted before this time.
    pub created_to: Option<Timestamp>,
    /// Last changed at or after this time.
    pub updated_from: Option<Timestamp>,
    /// Last changed before this time.
    pub updated_to: Option<Timestamp>,
    /// Only tasks with this correlation id.
    pub correlation_id: Option<String>,
}

impl TaskFilter {
    /// Refuses a filter no store should run: a key prefix longer than a key may be, or holding
    /// control characters (no key holds one; PostgreSQL cannot even store NUL).
    pub fn validate(&self) -> Result<(), StoreError> {
        if let Some(p) = &self.key_prefix
            && (p.len() > MAX_TASK_KEY_LEN || p.chars().any(char::is_control))
        {
            return Err(StoreError::InvalidInput(format!(
                "a key prefix must be at most {MAX_TASK_KEY_LEN} bytes with no control characters"
            )));
        }
        if self.correlation_id.as_ref().is_some_and(|c| c.len() > MAX_TASK_KEY_LEN || c.contains('\0')) {
            return Err(StoreError::InvalidInput(format!("correlation id: at most {MAX_TASK_KEY_LEN} bytes, no NUL")));
        }
        if self.workflow.as_ref().is_some_and(|w| w.len() > 1000 || w.contains('\0')) {
            return Err(StoreError::InvalidInput("workflow: at most 1000 bytes, no NUL".into()));
        }
        Ok(())
    }

    /// The key range that the prefix stands for, `lo <= key < hi` in byte order, so that a store
    /// reads it from an index on the key; `hi` is none when no string bounds it (see
    /// [`prefix_upper_bound`]). None without a prefix, or with an empty one (every key matches).
    pub fn key_range(&self) -> Option<(&str, Option<String>)> {
        let p = self.key_prefix.as_deref().filter(|p| !p.is_empty())?;
        Some((p, prefix_upper_bound(p)))
    }
}

/// The least string above every string that starts with `prefix`, in code point order (which is
/// UTF-8's byte order): the prefix with its last character moved one code point on, dropping
/// trailing `char::MAX`es first. None when the prefix is only `char::MAX`es (nothing is above).
/// Strings `s` with `prefix <= s < bound` are exactly those that start with the prefix.
pub fn prefix_upper_bound(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // The next scalar value: surrogates are not characters, so U+D7FF is followed by U+E000.
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// A page of tasks, newest first (by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListTasks {
    /// Which tasks.
    pub filter: TaskFilter,
    /// Also tasks the archiver moved to history (they come back with `archived` set), merged
    /// with the live ones in one order by id.
    pub include_archived: bool,
    /// Only tasks with an id below this: the last id of the page before, for the next page.
    pub before: Option<TaskId>,
    /// At most this many tasks.
    pub limit: u32,
}

impl Default for ListTasks {
    /// Every live task, newest first, one page of 50.
    fn default() -> Self {
        ListTasks { filter: TaskFilter::default(), include_archived: false, before: None, limit: 50 }
    }
}

impl ListTasks {
    /// Refuses what no store should run (see [`TaskFilter::validate`]).
    pub fn validate(&self) -> Result<(), StoreError> {
        self.filter.validate()
    }
}

/// A page of one task's events, in the order they were written (by id), so that a task with very
/// many events is read a page at a time: the next page starts after the last id of this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEvents {
    /// The task, live or archived.
    pub task_id: TaskId,
    /// Only events with an id above this one.
    pub after: Option<i64>,
    /// At most this many events; at most [`MAX_EVENT_PAGE`].
    pub limit: u32,
}

/// The most events one page holds.
pub const MAX_EVENT_PAGE: u32 = 10_000;

impl TaskEvents {
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.limit > MAX_EVENT_PAGE {
            return Err(StoreError::InvalidInput(format!("at most {MAX_EVENT_PAGE} events per page")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upper_bound_closes_exactly_the_strings_with_the_prefix() {
        assert_eq!(prefix_upper_bound("order-1").as_deref(), Some("order-2"));
        assert_eq!(prefix_upper_bound("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_upper_bound("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_upper_bound("z\u{7F}").as_deref(), Some("z\u{80}"));
        assert_eq!(prefix_upper_bound("\u{10FFFF}\u{10FFFF}"), None);
        assert_eq!(prefix_upper_bound(""), None);
        let p = "ord\u{e9}r";
        let hi = prefix_upper_bound(p).unwrap();
        for s in ["ord\u{e9}r", "ord\u{e9}r-1", "ord\u{e9}r\u{10FFFF}x"] {
            assert!(p <= s && s < hi.as_str(), "{s:?} is in");
        }
        for s in ["ord\u{e9}", "ord\u{ea}", "ord\u{e9}s", "orde"] {
            assert!(!(p <= s && s < hi.as_str()), "{s:?} is out");
        }
    }

    #[test]
    fn filters_refuse_control_characters_and_long_prefixes() {
        let f = |p: &str| TaskFilter { key_prefix: Some(p.into()), ..TaskFilter::default() }.validate();
        assert!(f("order-").is_ok() && f(&"k".repeat(MAX_TASK_KEY_LEN)).is_ok());
        assert!(f("a\0").is_err() && f("a\n").is_err() && f(&"k".repeat(MAX_TASK_KEY_LEN + 1)).is_err());
        let empty = TaskFilter { key_prefix: Some(String::new()), ..TaskFilter::default() };
        assert_eq!(empty.key_range(), None, "an empty prefix matches every key");
    }
}
