//! The worker protocol's JSON, from the worker's side (`docs/worker-protocol.md`). Unknown fields
//! in answers are ignored, so a newer server does not break an older worker.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Serialize)]
pub(crate) struct PollRequest<'a> {
    pub agents: &'a [String],
    pub worker: &'a str,
    pub capacity: u32,
    pub wait_ms: u64,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub domains: &'a [String],
}

#[derive(Debug, Deserialize)]
pub(crate) struct PollAnswer {
    pub steps: Vec<Step>,
}

/// One step handed to this worker.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    pub step_id: String,
    pub task_id: String,
    #[serde(default)]
    pub task_key: Option<String>,
    /// The step's instance name (`charge`, `charge#2` in a loop's second pass).
    pub name: String,
    pub agent: String,
    /// 1 for the first claim of the step, 2 for the second...
    pub attempt: u32,
    pub input: Value,
    pub config: Value,
    /// The same on every attempt: pass it to the services the step calls.
    pub idempotency_key: String,
    pub lease_token: String,
    pub complete_by: String,
    /// The lease's window from the claim, in seconds.
    pub seconds_left: f64,
}

#[derive(Debug, Serialize)]
pub(crate) struct HeartbeatRequest<'a> {
    pub lease_token: &'a str,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HeartbeatAnswer {
    pub held: bool,
    #[serde(default)]
    pub seconds_left: Option<f64>,
}

/// Replies for many steps in one request (`POST /v1/agents/replies`).
#[derive(Debug, Serialize)]
pub(crate) struct ReplyBatch<'a> {
    pub worker: &'a str,
    pub replies: Vec<BatchReply<'a>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct BatchReply<'a> {
    pub step_id: &'a str,
    pub lease_token: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<BatchFailure<'a>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct BatchFailure<'a> {
    pub reason: &'a str,
    pub permanent: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct BatchAnswer {
    pub results: Vec<BatchResult>,
}

/// `applied`, `repeated`, `lease_lost` or `invalid` (with `detail`).
#[derive(Debug, Deserialize)]
pub(crate) struct BatchResult {
    pub outcome: String,
    #[serde(default)]
    pub detail: Option<String>,
}

/// The server's problem body (RFC 9457), what the worker reads of it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Problem {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub detail: String,
}
