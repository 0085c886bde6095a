//! The API's limits, each documented in the README and the OpenAPI document's description.

use std::time::Duration;

/// The most items one page may hold.
pub const MAX_PAGE: u32 = 1000;
/// A page's size when the request names none.
pub const DEFAULT_PAGE: u32 = 50;
/// The most events a task's answer carries before paging.
pub const DEFAULT_EVENTS: u32 = 100;
/// The most tasks one batch may submit, and jobs one batch may enqueue.
pub const MAX_BATCH: usize = 1000;

#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest request body, in bytes (default 1 MiB; a task's input may be up to 1 MiB
    /// itself, so its submission needs a little more: raise it when inputs are that large).
    pub body_bytes: usize,
    /// How long one request may take before the server answers 408 and drops it.
    pub request_time: Duration,
    /// Requests served at once; more wait their turn.
    pub in_flight: usize,
    /// Event streams open at once; more are answered 503.
    pub streams: usize,
    /// How long one event stream lasts before it ends (its client reconnects from its last id).
    pub stream_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 1 << 20,
            request_time: Duration::from_secs(30),
            in_flight: 1024,
            streams: 256,
            stream_time: Duration::from_secs(3600),
        }
    }
}

/// A page size from a query: the default when none, refused beyond the maximum.
pub fn page(limit: Option<u32>) -> Result<u32, crate::error::ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(0) => Err(crate::error::ApiError::invalid("limit: must be at least 1")),
        Some(n) if n > MAX_PAGE => Err(crate::error::ApiError::invalid(format!("limit: at most {MAX_PAGE}"))),
        Some(n) => Ok(n),
    }
}
