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
    /// What an earlier attempt last reported of its progress (`report_progress`, or a server's
    /// record of it): where this attempt may go on from. None when none was reported.
    #[serde(default)]
    pub progress: Option<Value>,
    /// What the handler last said of its progress, for the next heartbeat to carry.
    #[serde(skip)]
    unsent: ProgressSlot,
}

impl Step {
    /// Says how far the work has come (any JSON, at most 64 KiB), such as
    /// `{"copied": 3400, "of": 10000}`. The next heartbeat carries it to the server (within about
    /// a second), which keeps it on the step for the API and the console; a later report
    /// replaces an unsent one.
    pub fn report_progress(&self, progress: Value) {
        *self.unsent.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress);
    }

    /// Whether a report waits to be sent.
    pub(crate) fn has_progress(&self) -> bool {
        self.unsent.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// The report not sent yet, taken for a heartbeat.
    pub(crate) fn take_progress(&self) -> Option<Value> {
        self.unsent.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Puts back a report whose heartbeat failed, unless a newer one came meanwhile.
    pub(crate) fn keep_progress(&self, progress: Value) {
        let mut slot = self.unsent.0.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(progress);
        }
    }
}

/// Shared by the handler's view of the step and its heartbeats (a clone of the step shares it).
#[derive(Debug, Clone, Default)]
struct ProgressSlot(std::sync::Arc<std::sync::Mutex<Option<Value>>>);

#[derive(Debug, Serialize)]
pub(crate) struct HeartbeatRequest<'a> {
    pub lease_token: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<&'a Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HeartbeatAnswer {
    pub held: bool,
    #[serde(default)]
    pub seconds_left: Option<f64>,
}

/// What a release took back (`POST /v1/agents/workers/{worker}/release`).
#[derive(Debug, Deserialize)]
pub(crate) struct ReleaseAnswer {
    pub returned: u32,
    pub gave_up: u32,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postpone_ms: Option<u64>,
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
