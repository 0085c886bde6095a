//! [`WriteTx`]: what the shared write path asks of one open write transaction. Each method is one
//! read or write in the store's own SQL; none decides anything.

use crate::StoreError;
use crate::decided::StepRow;
use crate::lapse::LapsePlan;
use serde_json::Value;
use shiftboss_core::decider::StepView;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{StepId, StepState, TaskId, TaskState, Timestamp};
use std::sync::Arc;

type Result<T> = std::result::Result<T, StoreError>;

/// What the decider and the writes need of a task row.
#[derive(Debug, Clone)]
pub struct TaskRow {
    /// The task's state.
    pub state: TaskState,
    /// The name of the workflow it runs.
    pub workflow: String,
    /// The version of that workflow it runs.
    pub version: u32,
    /// Its input (`${task.input}`).
    pub input: Value,
    /// The application's key (the order id); a child's key is made from its parent's.
    pub key: String,
    /// Its priority, added to each step's own; a child takes its parent's.
    pub priority: i32,
    /// 0 for a top-level task, its parent's depth + 1 for a child.
    pub depth: i64,
    /// A sub-workflow's child task: its end moves its parent's step. A top-level task (most of
    /// them) has no parent to tell, which saves a read per finished task.
    pub is_child: bool,
    /// Bumped by every operator action that runs steps again from scratch; part of the
    /// idempotency keys of the steps written after it (see `shiftboss_core::idempotency`).
    pub generation: i64,
    /// Its isolation domains by agent (`SubmitTask::domains`); empty for most tasks.
    pub domains: crate::TaskDomains,
    /// Its correlation id (`SubmitTask::correlation_id`), which a sub-workflow's child takes.
    pub correlation_id: Option<String>,
}

/// A task row to insert: a submission, or a child a sub-workflow step starts.
#[derive(Debug, Clone)]
pub struct NewTask<'a> {
    /// The task's key: the caller's, or for a child one made from its parent's.
    pub key: &'a str,
    /// The name of the workflow it runs.
    pub workflow: &'a str,
    /// The version of that workflow it runs (the newest when the caller named none).
    pub version: u32,
    /// Its priority: the caller's, or for a child its parent's.
    pub priority: i32,
    /// Its input: a submission's, or the one a sub-workflow step gives its child.
    pub input: &'a Value,
    /// The parent task and the name of its step that waits for this child.
    pub parent: Option<(TaskId, &'a str)>,
    /// 0 for a top-level task, its parent's depth + 1 for a child.
    pub depth: i64,
    /// When the workflow's timeout passes, if it has one (the reconciler fails the task then).
    pub deadline_at: Option<i64>,
    /// Its isolation domains by agent as JSON text (`tasks.domains`); none when it has none.
    pub domains: Option<String>,
    /// Its correlation id.
    pub correlation_id: Option<String>,
}

/// A task's domain map as its row keeps it: JSON text, none when empty.
pub fn domains_text(domains: &crate::TaskDomains) -> Option<String> {
    (!domains.is_empty()).then(|| serde_json::to_string(domains).expect("a map of strings serializes"))
}

/// A task's domain map from its row's text; none or unreadable text is no domains (the column is
/// written from a validated map only).
pub fn domains_of(text: Option<&str>) -> crate::TaskDomains {
    text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default()
}

/// A task a key already names, live or archived: its id, workflow and input as stored (JSON text).
pub type KeyOwner = (TaskId, String, String);

/// What became of a submitted task's row: inserted, or its key names a task already.
#[derive(Debug, Clone)]
pub enum Keyed {
    /// The new task's id.
    New(TaskId),
    /// The task that holds the key, live or archived.
    Taken(KeyOwner),
}

/// The reads and writes of one open write transaction that the shared write path needs.
///
/// Every method runs inside the caller's transaction; nothing commits here. `async` for the stores
/// whose statements are network round trips; a store that runs synchronously returns completed
/// futures (see the module's doc). Locks: a store that locks task rows (PostgreSQL, for C7) takes
/// them in `lock_tasks` and `lock_child`; a store whose transactions are serialised already
/// (SQLite's single writer) does nothing there.
// `async fn` in a public trait: the auto traits of each store's futures leak to the generic
// callers through the concrete type, which is what lets PostgreSQL's stay `Send` and SQLite's not.
#[allow(async_fn_in_trait)]
pub trait WriteTx {
    /// The store's time, read once for the whole transaction.
    fn now(&self) -> Timestamp;

    /// A registered definition (cached: a version never changes once registered).
    async fn definition(&self, name: &str, version: u32) -> Result<Arc<WorkflowDef>>;

    /// The newest registered version of a workflow.
    async fn latest_version(&self, name: &str) -> Result<Option<u32>>;

    /// The task row; `NotFound` when there is none.
    async fn load_task(&self, task: TaskId) -> Result<TaskRow>;

    /// The decider's view of the task's step rows, in creation (id) order.
    async fn load_steps(&self, task: TaskId) -> Result<Vec<StepView>>;

    /// Records an event of this transaction.
    async fn event(
        &self,
        task: TaskId,
        step: Option<StepId>,
        kind: &'static str,
        level: EventLevel,
        actor: &str,
        detail: Value,
    ) -> Result<()>;

    /// Locks these tasks and their ancestors until the transaction ends (a no-op where
    /// transactions are serialised).
    async fn lock_tasks(&self, tasks: &[TaskId]) -> Result<()>;

    /// Locks a child of a task this transaction holds.
    async fn lock_child(&self, child: TaskId) -> Result<()>;

    // Tasks.

    /// Inserts a task row in state running (held by this transaction); `None` when its key is
    /// taken already.
    async fn insert_task(&self, new: &NewTask<'_>) -> Result<Option<TaskId>>;

    /// Inserts submitted tasks' rows (top-level, their keys distinct), each unless its key is
    /// taken, live or archived (a key stays taken in history): one [`Keyed`] per row, in order. A
    /// new row is held by this transaction. A key that was taken and released again while this
    /// ran (its task purged from history) is `Unavailable`: the caller may try again.
    async fn insert_submitted(&self, new: &[NewTask<'_>]) -> Result<Vec<Keyed>>;

    /// A task's own status-channel subscription, written with its submission: the store's outbox
    /// then writes a delivery for each of its messages, its first (`task.received`) included.
    async fn insert_task_subscription(&self, task: TaskId, target: &crate::WebhookTarget) -> Result<()>;

    /// Sets a task's state, and its output when one is given.
    async fn set_task_state(&self, task: TaskId, state: TaskState, output: Option<&Value>) -> Result<()>;

    /// Clears a task's output (a rerun).
    async fn clear_task_output(&self, task: TaskId) -> Result<()>;

    /// The live child tasks (running, paused, compensating) that a parent's step started.
    async fn children_of(&self, parent: TaskId, step: &str) -> Result<Vec<TaskId>>;

    /// A child's parent and the name of the parent's step that started it; `None` for a
    /// top-level task.
    async fn parent_of(&self, child: TaskId) -> Result<Option<(TaskId, String)>>;

    // Steps.

    /// Inserts a step row (its bucket is its task's); a row that queues work rings the due-work
    /// channel at commit.
    async fn insert_step(
        &self,
        task: TaskId,
        name: &str,
        state: StepState,
        compensates: Option<&str>,
        row: &StepRow,
    ) -> Result<StepId>;

    /// Sets a step's state, output and error; its id, `None` when the task has no such row.
    async fn update_step(
        &self,
        task: TaskId,
        name: &str,
        state: StepState,
        output: Option<&Value>,
        error: Option<&str>,
    ) -> Result<Option<StepId>>;

    /// Cancels a step if it is pending or processing, clearing its lease (a reply from its holder
    /// is then fenced off); its id and kind, `None` when it was not live.
    async fn cancel_live_step(&self, task: TaskId, name: &str) -> Result<Option<(StepId, StepKind)>>;

    /// Ends the parent's sub-workflow step that waits for this very child (processing, its output
    /// naming the child); its id, `None` when the parent moved on.
    async fn end_child_step(
        &self,
        parent: TaskId,
        step: &str,
        child: TaskId,
        state: StepState,
        output: &Value,
        error: Option<&str>,
    ) -> Result<Option<StepId>>;

    /// A step's task and name.
    async fn find_step(&self, step: StepId) -> Result<Option<(TaskId, String)>>;

    /// What a refused reply's step holds now; `None` when there is no such step.
    async fn replied_step(&self, step: StepId) -> Result<Option<super::RepliedStep>>;

    /// A step's id by its task and name.
    async fn step_id(&self, task: TaskId, name: &str) -> Result<Option<StepId>>;

    /// Holds every pending step of a task (due at [`super::HELD`]): a paused task's steps wait.
    async fn hold_pending_steps(&self, task: TaskId) -> Result<()>;

    /// Makes a task's held pending steps due now; rings the due-work channel when there were any.
    async fn release_held_steps(&self, task: TaskId) -> Result<()>;

    /// Puts a step back to pending with its count and lease cleared, due at `due_at`.
    async fn reset_step(&self, task: TaskId, name: &str, due_at: i64) -> Result<()>;

    /// Deletes a step row; its kind, `None` when there was none.
    async fn delete_step(&self, task: TaskId, name: &str) -> Result<Option<StepKind>>;

    /// Adds one to the task's generation (an operator's action runs steps again from scratch).
    async fn bump_generation(&self, task: TaskId) -> Result<()>;

    /// Marks a step processed with this output, clearing its lease (a skip).
    async fn finish_step(&self, task: TaskId, name: &str, output: &Value) -> Result<()>;

    /// Writes what becomes of a held step (a lapse, or a failed attempt) or of an unclaimed one,
    /// fenced by its lease token and its state (`plan.from`): false when the step had moved on. A step of a paused task
    /// that goes back to pending is held like its others; a step back in the queue rings the
    /// due-work channel.
    async fn write_lapse(&self, step: StepId, lease_token: i64, plan: &LapsePlan) -> Result<bool>;

    /// An `alert_only` step past its complete-by keeps its holder with no deadline; fenced like a
    /// take-back, false when the step had moved on.
    async fn mark_overdue(&self, step: StepId, lease_token: i64) -> Result<bool>;

    /// An `alert_only` step unclaimed past its claim timeout stays pending and is not looked at
    /// again for it (its claim timeout is dropped); fenced by the lease token and
    /// `state = 'pending'`, false when the step had moved on.
    async fn mark_unclaimed(&self, step: StepId, lease_token: i64) -> Result<bool>;
}
