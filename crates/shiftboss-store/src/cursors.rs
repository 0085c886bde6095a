//! Named cursors: where a reader of the event log that must survive a restart stands (the
//! alerter, issue 18). A cursor only moves forward, so two readers that overlap for a moment (one
//! losing its lease as the other takes it) cannot move it back; the worst they do is read a stretch
//! twice, and a reader of the log is built to bear that.

use crate::StoreError;

/// The longest name a cursor may have.
pub const MAX_CURSOR_NAME_LEN: usize = 100;

/// Refuses a name no store should keep: empty, too long, or with control characters.
pub fn validate_cursor_name(name: &str) -> Result<(), StoreError> {
    if name.is_empty() || name.len() > MAX_CURSOR_NAME_LEN || name.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput(format!(
            "a cursor name is 1 to {MAX_CURSOR_NAME_LEN} bytes with no control characters"
        )));
    }
    Ok(())
}

/// Refuses a position no event id can be (ids start at 1; 0 is "before the first").
pub fn validate_cursor_position(to: i64) -> Result<(), StoreError> {
    if to < 0 {
        return Err(StoreError::InvalidInput("a cursor position is an event id, 0 or more".into()));
    }
    Ok(())
}
