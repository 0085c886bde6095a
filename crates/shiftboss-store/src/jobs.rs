//! Params and results of the retry-job operations (M1-M8) and of the archiver.

use crate::StoreError;
use crate::decided::StepRow;
use crate::params::{LeaderTerm, MAX_INPUT_BYTES, MAX_TASK_KEY_LEN};
use shiftboss_core::buckets::{BUCKETS, bucket_of};
use shiftboss_core::jobs::{self, JobState};
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::time::duration_ms;
use shiftboss_core::workflow::{DEFAULT_STEP_TIMEOUT, OnTimeout, StepKind};
use shiftboss_core::{TaskId, Timestamp};
use std::time::Duration;

/// The longest complete-by window a job may ask for.
pub const MAX_JOB_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The longest delay a job may ask for (ten years): far enough for any schedule, and no overflow.
pub const MAX_JOB_DELAY: Duration = Duration::from_secs(3650 * 86_400);

/// One job to enqueue: run `handler` with `params` until it succeeds, on the retry schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct EnqueueJob {
    /// The agent type that runs it.
    pub handler: String,
    /// The handler's parameters: a JSON object.
    pub params: serde_json::Value,
    /// A unique key: enqueueing the same key again (live or in history) gives back the same job
    /// when the handler and parameters match, and is refused otherwise. A fresh key when none.
    pub key: Option<String>,
    /// Not before this time (the store's clock); now when none.
    pub due_at: Option<Timestamp>,
    /// Not before this long after the enqueue, by the store's clock (so that a client's own
    /// clock does not matter); with `due_at` too, the later of the two.
    pub delay: Option<Duration>,
    /// Intervals, or a maximum count; the server's policy for the handler when none.
    pub retry: Option<RetryPolicy>,
    /// The complete-by window of each try (default 30 s).
    pub timeout: Option<Duration>,
    /// The priority of its step: a higher priority is claimed first.
    pub priority: i32,
    /// The load-balance number (0-255); a hash of the key when none.
    pub bucket: Option<u16>,
}

impl EnqueueJob {
    /// A job with every option at its default.
    pub fn new(handler: impl Into<String>, params: serde_json::Value) -> EnqueueJob {
        EnqueueJob {
            handler: handler.into(),
            params,
            key: None,
            due_at: None,
            delay: None,
            retry: None,
            timeout: None,
            priority: 0,
            bucket: None,
        }
    }

    /// Checks what does not need the database; stores call it before they write anything.
    pub fn validate(&self) -> Result<(), StoreError> {
        let bad = |m: String| Err(StoreError::InvalidInput(m));
        if let Err(e) = jobs::definition(&self.handler) {
            return bad(e.to_string());
        }
        if let Some(key) = &self.key
            && (key.is_empty() || key.len() > MAX_TASK_KEY_LEN || key.chars().any(char::is_control))
        {
            return bad(format!("a job's unique key must be 1 to {MAX_TASK_KEY_LEN} bytes with no control characters"));
        }
        if !self.params.is_object() {
            return bad("job params must be a JSON object".into());
        }
        // Serialized once: its length, and NUL (which PostgreSQL cannot keep), escaped as \u0000.
        let Ok(text) = serde_json::to_string(&self.params) else {
            return bad("job params cannot be written as JSON".into());
        };
        let size = text.len();
        if size > MAX_INPUT_BYTES || text.contains("\\u0000") {
            return bad(format!("job params are {size} bytes; at most {MAX_INPUT_BYTES}, with no NUL characters"));
        }
        if let Some(p) = &self.retry
            && let Err(e) = p.validate()
        {
            return bad(format!("retry policy: {e}"));
        }
        if let Some(t) = self.timeout
            && (t.is_zero() || t > MAX_JOB_TIMEOUT)
        {
            return bad(format!("a job's timeout must be above 0 and at most {} s", MAX_JOB_TIMEOUT.as_secs()));
        }
        if let Some(b) = self.bucket
            && b >= BUCKETS
        {
            return bad(format!("bucket {b} is out of range: buckets are 0 to {}", BUCKETS - 1));
        }
        if self.due_at.is_some_and(|t| t.0 < 0 || t.0 >= i64::MAX / 2) {
            return bad("a job's due time must be after 1970 and before the year 100,000,000".into());
        }
        if self.delay.is_some_and(|d| d > MAX_JOB_DELAY) {
            return bad(format!("a job's delay must be at most {} days", MAX_JOB_DELAY.as_secs() / 86_400));
        }
        Ok(())
    }

    /// The key the job is stored under (its unique key, or a fresh one).
    pub fn key_or_new(&self) -> String {
        self.key.clone().unwrap_or_else(|| format!("job-{}", uuid::Uuid::new_v4()))
    }

    /// Its load-balance number under `key`.
    pub fn bucket_for(&self, key: &str) -> u16 {
        self.bucket.unwrap_or_else(|| bucket_of(key))
    }

    /// The row of its one step, for the job stored under `key`: its idempotency key is made from
    /// the job's key, so a job enqueued again under its key after a lost write calls its handler
    /// with the key it used before.
    pub fn step_row(&self, key: &str, now: Timestamp) -> StepRow {
        StepRow {
            agent: self.handler.clone(),
            due_at: self.due_at.map_or(now.0, |t| t.0.max(now.0)).max(self.delay.map_or(now.0, |d| now.plus(d).0)),
            priority: self.priority,
            input: self.params.to_string(),
            output: None,
            idempotency_key: shiftboss_core::idempotency::step_key(key, shiftboss_core::jobs::STEP, 0),
            timeout_ms: duration_ms(self.timeout.unwrap_or(DEFAULT_STEP_TIMEOUT)),
            config: "{}".into(),
            retry: self.retry.as_ref().map(|p| serde_json::to_string(p).expect("policies serialize")),
            kind: StepKind::Agent.as_str(),
            domain: None,
            fallback_at: None,
            response_timeout_ms: None,
            on_timeout: OnTimeout::Retry.as_str(),
            claim_timeout_ms: None,
            deadline_at: None,
        }
    }

    /// What a repeat of a key that names job `id` gets: the same job when the handler and the
    /// parameters match, a `Conflict` otherwise.
    pub fn repeat_of(&self, key: &str, id: TaskId, workflow: &str, stored: &str) -> Result<TaskId, StoreError> {
        let same = jobs::handler_of(workflow) == Some(self.handler.as_str())
            && serde_json::from_str::<serde_json::Value>(stored).is_ok_and(|v| v == self.params);
        if same {
            Ok(id)
        } else {
            Err(StoreError::Conflict(format!(
                "unique key {key:?} was enqueued before with another handler or params (task {id})"
            )))
        }
    }
}

/// A job named by its id or by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRef {
    /// The job's task id.
    Id(TaskId),
    /// The job's unique key.
    Key(String),
}

/// Jobs enqueued together, in one transaction: all or none.
#[derive(Debug, Clone)]
pub struct EnqueueJobs {
    /// The jobs, in order; at most `MAX_ENQUEUE_BATCH`.
    pub jobs: Vec<EnqueueJob>,
    /// Who enqueues, for the event log.
    pub actor: String,
}

/// The most jobs one call enqueues.
pub const MAX_ENQUEUE_BATCH: usize = 10_000;

/// One job as an operator sees it (M2's record).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobRecord {
    /// The job's task id.
    pub id: TaskId,
    /// Its unique key (`job-` and a UUID when the caller gave none).
    pub key: String,
    /// The agent type that runs it.
    pub handler: String,
    /// Where it stands, from its task's and its step's states.
    pub state: JobState,
    /// Its load-balance bucket (M3).
    pub bucket: u16,
    /// Its step's priority.
    pub priority: i32,
    /// The handler's parameters.
    pub params: serde_json::Value,
    /// What the handler returned, once it succeeded.
    pub output: Option<serde_json::Value>,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When it may run next (its handle time); when it finished, for a finished job.
    pub due_at: Timestamp,
    /// When its task's row last changed.
    pub updated_at: Timestamp,
    /// Failures so far (M2's retry count).
    pub retries: u32,
    /// Claims so far.
    pub attempts: u32,
    /// The last failure's reason.
    pub last_error: Option<String>,
    /// True when it was read from the history tables.
    pub archived: bool,
}

/// Which tables a job search reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobPlace {
    /// The hot tables: jobs not yet archived (live, or finished within the retention time).
    #[default]
    Live,
    /// The history tables: archived jobs.
    History,
}

/// A search for jobs, newest first. Every filter given must match.
#[derive(Debug, Clone, PartialEq)]
pub struct JobQuery {
    /// Which tables to search.
    pub place: JobPlace,
    /// Only this job.
    pub id: Option<TaskId>,
    /// Only jobs of this handler.
    pub handler: Option<String>,
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Last changed at or after this time.
    pub from: Option<Timestamp>,
    /// Last changed before this time.
    pub to: Option<Timestamp>,
    /// The last failure's reason contains this text.
    pub reason: Option<String>,
    /// Only jobs with an id below this, for paging.
    pub before: Option<TaskId>,
    /// At most this many jobs.
    pub limit: u32,
}

impl Default for JobQuery {
    fn default() -> Self {
        JobQuery {
            place: JobPlace::Live,
            id: None,
            handler: None,
            state: None,
            from: None,
            to: None,
            reason: None,
            before: None,
            limit: 50,
        }
    }
}

impl JobQuery {
    /// Refuses a search no store should run.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.reason.as_ref().is_some_and(|r| r.len() > 1000 || r.contains('\0')) {
            return Err(StoreError::InvalidInput("reason text: at most 1000 bytes, no NUL".into()));
        }
        if self.handler.as_ref().is_some_and(|h| h.len() > 1000 || h.contains('\0')) {
            return Err(StoreError::InvalidInput("handler: at most 1000 bytes, no NUL".into()));
        }
        Ok(())
    }

    /// The pattern of a `LIKE` that finds `reason` as plain text (`%`, `_` and `\` escaped).
    pub fn reason_pattern(&self) -> Option<String> {
        self.reason.as_ref().map(|r| {
            let escaped = r.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
            format!("%{escaped}%")
        })
    }
}

/// Given-up jobs to run again, from the hot tables and from history: each goes back to its first
/// try with its count at 0 (its history kept in its events).
#[derive(Debug, Clone)]
pub struct ResubmitJobs {
    /// Which jobs: the state is always given up; `place` is ignored (both are searched); `limit`
    /// caps how many one call resubmits.
    pub query: JobQuery,
    /// Only count what would be resubmitted.
    pub dry_run: bool,
    /// Who resubmits, for the event log.
    pub actor: String,
    /// Why, for the event log.
    pub reason: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResubmitReport {
    /// Given-up jobs that matched the filter.
    pub matched: u64,
    /// Of those, sent back to run (0 on a dry run).
    pub resubmitted: u64,
}

/// The archiver's pass (leader-only): finished tasks move to history with their steps and events.
#[derive(Debug, Clone)]
pub struct Archive {
    /// The supervisor's leader term: the pass is refused if it no longer holds.
    pub leader: LeaderTerm,
    /// A task finished (terminal) for at least this long moves to history.
    pub after: Duration,
    /// History older than this is deleted; kept for ever when none.
    pub keep: Option<Duration>,
    /// At most this many top-level tasks (each with its sub-workflow children) per pass.
    pub limit: u32,
}

/// An operator moves one finished top-level task, with its sub-workflow children, steps and
/// events, to history now (Conductor's remove), rather than waiting for the archiver.
#[derive(Debug, Clone)]
pub struct ArchiveTask {
    pub task_id: TaskId,
    /// Who asked: the `task.archived` events name them.
    pub actor: String,
}

impl ArchiveTask {
    pub fn validate(&self) -> Result<(), StoreError> {
        crate::params::check_actor_and_reason(&self.actor, "")
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveReport {
    /// Tasks moved to history, children included.
    pub tasks: u64,
    /// Steps moved to history with those tasks.
    pub steps: u64,
    /// Events moved to history with those tasks.
    pub events: u64,
    /// Tasks deleted from history past `keep`.
    pub purged: u64,
    /// Delivered status-channel messages moved to history.
    pub deliveries: u64,
}
