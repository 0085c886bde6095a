//! What the worker protocol says, as JSON (issue 17). Ids and lease tokens are strings, opaque
//! to workers; times are RFC 3339.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A worker asks for work.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PollRequest {
    /// The agent types it serves: each must be one the server declares remote (`--remote-agent`).
    pub agents: Vec<String>,
    /// The worker's own id (1 to 100 visible ASCII characters), stable while it runs: claims
    /// are recorded under `worker:<id>`, and the workers list shows it.
    pub worker: String,
    /// How many steps it can take now: at most this many are handed out (1 to 1,000).
    pub capacity: u32,
    /// How long to wait for work when none is due, in milliseconds (default 0: answer at once).
    /// Capped at 20 s, and below the server's request timeout.
    #[serde(default)]
    pub wait_ms: u64,
    /// Isolation domains the worker serves, besides steps with no domain.
    #[serde(default)]
    pub domains: Vec<String>,
}

/// The steps handed to a worker; empty when none became due within the wait.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PollAnswer {
    pub steps: Vec<WorkItem>,
}

/// One claimed step: everything a worker needs to run it and to answer for it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WorkItem {
    /// The step's id: the path of its heartbeat, complete and fail.
    pub step_id: String,
    /// Its task's id.
    pub task_id: String,
    /// Its task's key (the application's id, such as the order id). Absent only if it could not
    /// be read after the claim; the claim stands anyway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_key: Option<String>,
    /// The step's instance name (`charge`, `charge#2` in a loop's second pass).
    pub name: String,
    /// Its agent type.
    pub agent: String,
    /// 1 for the first claim of this step, 2 for the second...
    pub attempt: u32,
    /// What the step is called with.
    pub input: Value,
    /// The step's config from the definition.
    pub config: Value,
    /// The same on every attempt: pass it to the services the step calls, so that they drop
    /// duplicates.
    pub idempotency_key: String,
    /// The claim's fencing token: every heartbeat, complete and fail must carry it.
    pub lease_token: String,
    /// When the lease lapses unless the worker answers or heartbeats first (RFC 3339).
    pub complete_by: String,
    /// The same, as seconds from the claim, by the store's clock: a worker measures its
    /// deadline with its own monotonic clock from before its poll was sent.
    pub seconds_left: f64,
    /// What an earlier attempt last reported of its progress (a heartbeat's, a postponement's):
    /// where this attempt may go on from. Absent when none was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
}

/// A heartbeat for a held step.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The token of the claim.
    pub lease_token: String,
    /// What the worker says of its work so far (any JSON, at most 64 KiB), kept on the step and
    /// shown by the API and the console and handed to the step's next attempt; absent keeps what an earlier
    /// heartbeat said.
    #[serde(default)]
    pub progress: Option<serde_json::Value>,
}

/// Whether the lease is still held, and until when.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatAnswer {
    /// False when the lease lapsed (the step may be running elsewhere) or the step ended: stop
    /// working on it and send nothing more.
    pub held: bool,
    /// The new complete-by, when held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete_by: Option<String>,
    /// Seconds from now to the new complete-by, when held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_left: Option<f64>,
}

/// A step done.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    /// The token of the claim.
    pub lease_token: String,
    /// The step's output (any JSON; `{}` when none).
    #[serde(default)]
    pub output: Option<Value>,
    /// The worker's id, for the event log (default: the token's name).
    #[serde(default)]
    pub worker: Option<String>,
}

/// A failed attempt at a step.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    /// The token of the claim.
    pub lease_token: String,
    /// Why, for the step's last error and the event log.
    pub reason: String,
    /// True for a fault that will not pass: the step goes to Error at once and an operator is
    /// alerted. False (the default): the step runs again after its retry policy's delay, or goes
    /// to Error when the policy has no try left.
    #[serde(default)]
    pub permanent: bool,
    /// The worker's id, for the event log (default: the token's name).
    #[serde(default)]
    pub worker: Option<String>,
}

/// A step handed back unfinished, to be claimed again after a delay.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostponeRequest {
    /// The token of the claim.
    pub lease_token: String,
    /// How long until the step may be claimed again, in milliseconds (0: at once; at most a year).
    pub after_ms: u64,
    /// What the worker says of its work so far, kept on the step as a heartbeat's progress is.
    #[serde(default)]
    pub progress: Option<Value>,
    /// The worker's id, for the event log (default: the token's name).
    #[serde(default)]
    pub worker: Option<String>,
}

/// What a reply did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReplyAnswer {
    /// True when this exact reply had been applied before (a repeat after a lost answer): nothing
    /// changed this time.
    pub repeated: bool,
    /// The task's state after the reply.
    pub task_state: String,
}

/// The workers seen polling, per agent type.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WorkersAnswer {
    pub agents: Vec<AgentWorkers>,
}

impl WorkersAnswer {
    /// The registry's rows (ordered by agent type) grouped by agent type, ages by the store's `now`.
    pub fn from_rows(rows: Vec<shiftboss_store::AgentWorker>, now: shiftboss_core::Timestamp) -> WorkersAnswer {
        let mut agents: Vec<AgentWorkers> = Vec::new();
        for r in rows {
            let w = WorkerSeenAt {
                worker: r.worker,
                first_seen_at: crate::wire::time(r.first_seen_at),
                last_seen_at: crate::wire::time(r.last_seen_at),
                seconds_since: now.since(r.last_seen_at).as_secs_f64(),
            };
            match agents.last_mut() {
                Some(a) if a.agent == r.agent => a.workers.push(w),
                _ => agents.push(AgentWorkers { agent: r.agent, workers: vec![w] }),
            }
        }
        WorkersAnswer { agents }
    }
}

/// One agent type's workers.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AgentWorkers {
    pub agent: String,
    pub workers: Vec<WorkerSeenAt>,
}

/// One worker, as the store last recorded it (written at most every few seconds per worker).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WorkerSeenAt {
    pub worker: String,
    pub first_seen_at: String,
    pub last_seen_at: String,
    /// Seconds since it was last seen, by the store's clock.
    pub seconds_since: f64,
}

/// Many replies at once: what a worker finished while its last batch was on the way. Each is
/// fenced and answered on its own, as `complete` and `fail` answer one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyBatch {
    /// The worker's id, for the event log (default: the token's name).
    #[serde(default)]
    pub worker: Option<String>,
    /// 1 to 1,000 replies.
    pub replies: Vec<BatchReply>,
}

/// One reply of a batch: `output` for a step done, `failure` for a failed attempt, or
/// `postpone_ms` for a step handed back unfinished (one of the three).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchReply {
    pub step_id: String,
    pub lease_token: String,
    /// The step's output, when it is done (`{}` when none of the three is given).
    #[serde(default)]
    pub output: Option<Value>,
    /// Why the attempt failed, instead of an output.
    #[serde(default)]
    pub failure: Option<BatchFailure>,
    /// Hands the step back, to be claimed again after this many milliseconds, as `postpone` does.
    #[serde(default)]
    pub postpone_ms: Option<u64>,
}

/// A failed attempt, as `fail` takes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchFailure {
    pub reason: String,
    #[serde(default)]
    pub permanent: bool,
}

/// What each reply of a batch did, in the request's order.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchAnswer {
    pub results: Vec<BatchResult>,
}

/// One reply's outcome: `applied`, `repeated` (the identical repeat of an applied reply: nothing
/// changed), `lease_lost` (the token is not the step's lease: nothing changed) or `invalid` (the
/// reply itself is wrong: `detail` says how).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchResult {
    pub step_id: String,
    pub outcome: String,
    /// The task's state after the reply, when applied or repeated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a worker's release took back: the steps it held, each pending again at once (its attempt
/// counted as failed) or, with no try left, in Error.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReleaseAnswer {
    /// Steps pending again, to be claimed at once.
    pub returned: u32,
    /// Steps whose retry policy had no try left (or whose total timeout had passed): in Error.
    pub gave_up: u32,
}

impl From<shiftboss_store::ExpiryReport> for ReleaseAnswer {
    fn from(r: shiftboss_store::ExpiryReport) -> ReleaseAnswer {
        ReleaseAnswer { returned: r.retried, gave_up: r.gave_up }
    }
}
