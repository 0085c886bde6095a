//! The kinds of events in the event log, the same in every store.

pub const TASK_RECEIVED: &str = "task.received";
pub const TASK_COMPLETED: &str = "task.completed";
pub const TASK_FAILED: &str = "task.failed";
pub const TASK_CANCELLED: &str = "task.cancelled";
pub const TASK_RESUMED: &str = "task.resumed";
pub const STEP_SCHEDULED: &str = "step.scheduled";
pub const STEP_CLAIMED: &str = "step.claimed";
pub const STEP_PROCESSED: &str = "step.processed";
/// A step went to Error: an alert.
pub const STEP_ERROR: &str = "step.error";
/// The supervisor found the lease lapsed and scheduled a retry.
pub const STEP_EXPIRED: &str = "step.expired";
/// A restarted scheduler returned a step it held before it died.
pub const STEP_RELEASED: &str = "step.released";
pub const STEP_RESUBMITTED: &str = "step.resubmitted";
pub const STEP_CANCELLED: &str = "step.cancelled";
/// A reply whose lease had lapsed, or whose step had moved on: recorded, never applied.
pub const REPLY_REJECTED: &str = "reply.rejected";
