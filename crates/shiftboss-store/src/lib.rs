//! The store contract: every operation shiftboss asks of its state store, as domain verbs with one
//! params struct each. SQLite and PostgreSQL implement it in crates of their own.
//!
//! Architecture invariant: no SQL here and no backend types. Every operation that changes state is
//! one transaction that writes the new state, its events and the work it causes (new steps, task
//! outcome) together; every write on behalf of a claim is fenced by the claim's lease token.

pub mod advance;
pub mod bulk;
pub mod clock;
pub mod cursors;
pub mod decided;
pub mod documents;
pub mod error;
pub mod event_kind;
pub mod fault;
pub mod jobs;
pub mod lapse;
pub mod listing;
pub mod params;
pub mod queues;
pub mod rates;
pub mod replication;
pub mod stalled;
pub mod step_logs;
pub mod stream;
pub mod subscription;
pub mod tokens;
pub mod webhooks;
pub mod workers;

pub use bulk::{BulkCommand, BulkFailure, BulkOperate, BulkReport, MAX_BULK_FAILURES, MAX_BULK_TASKS};
pub use clock::{Clock, ManualClock};
pub use documents::DocumentKind;
pub use error::StoreError;
pub use jobs::*;
pub use listing::*;
pub use params::*;
pub use queues::{AgentQueue, QueueStats};
pub use rates::{CountEvents, EventCounts};
pub use replication::Replication;
pub use stalled::{MAX_STALLED, StalledTask, StalledTasks};
pub use step_logs::StepLogs;
pub use stream::{EventCursor, EventFence, EventFilter, EventsRead, ReadEvents, StreamEvent};
pub use subscription::{Subscription, WakeFn};
pub use tokens::*;
pub use webhooks::*;
pub use workers::*;

use async_trait::async_trait;
use shiftboss_core::buckets::Member;
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, StepId, TaskId, TaskState, Timestamp};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A durable state store for tasks and steps.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The store's clock: the database's own, or a manual one in tests. Every lease decision uses it.
    async fn now(&self) -> Result<Timestamp>;

    /// Registers a workflow definition. Registering the same name, version and content again is a
    /// no-op; the same name and version with other content is a conflict.
    async fn register_workflow(&self, def: &WorkflowDef) -> Result<RegisterOutcome>;

    /// A registered definition; the newest version when `version` is none.
    async fn get_workflow(&self, name: &str, version: Option<u32>) -> Result<Option<WorkflowDef>>;

    /// Writes a task, its first steps and its `task.received` event in one transaction (P12).
    /// Submitting a key that exists with the same workflow and input returns the existing task and
    /// changes nothing; with another workflow or input it is a `Conflict`.
    async fn submit_task(&self, p: SubmitTask) -> Result<Submitted>;

    /// Submits many tasks in one transaction, each as `submit_task` would (idempotent by its key),
    /// with one `Submitted` per task in their order; all of them or none. A key given twice is
    /// one task (the later submission gets it back with `created: false`). A key that names a
    /// task with another workflow or input is a `Conflict` naming the key; a task that is invalid
    /// (its key, input, workflow) is `InvalidInput` naming its index. At most `MAX_SUBMIT_BATCH`.
    async fn submit_tasks(&self, tasks: Vec<SubmitTask>) -> Result<Vec<Submitted>>;

    /// Submits tasks as `submit_tasks` does, then runs each of `claims` in the same transaction,
    /// after the submissions, as `claim_due_work` would (without a next due time): the handoff of
    /// new steps to remote workers' waiting polls, which get what the submissions made due (or
    /// anything else due for them, highest priority first) with the submissions' own commit
    /// instead of in a claim of their own after it. All or nothing, as `submit_tasks`: an error
    /// writes nothing and claims nothing.
    async fn submit_tasks_and_claim(
        &self,
        tasks: Vec<SubmitTask>,
        claims: Vec<ClaimDueSteps>,
    ) -> Result<SubmittedAndClaimed>;

    /// Claims due Pending steps for one instance (P14), and in the same transaction, when the claim
    /// came up short, the next due time of a step it could claim later (see
    /// [`ClaimedWork::next_due`]): an idle scheduler sleeps until then instead of polling. Which
    /// steps are chosen under the limit goes by highest priority, then oldest due; the order of the
    /// claimed steps is unspecified.
    async fn claim_due_work(&self, p: ClaimDueSteps) -> Result<ClaimedWork>;

    /// Records agents' replies, each fenced by its lease token, and moves their tasks on.
    /// The outcomes are in the order of the replies.
    async fn record_replies(&self, p: RecordReplies) -> Result<Vec<ReplyOutcome>>;

    /// The supervisor's sweep (P6, P17): Processing steps whose complete-by has passed go back to
    /// Pending after their retry delay, or to Error at the threshold. Fenced by the leader's term.
    /// In the same transaction, the next complete-by and the next due time after it (see
    /// [`Swept`]), so that the supervisor sweeps when a lease can lapse, not on a tick.
    async fn sweep(&self, p: ExpireLeases) -> Result<Swept>;

    /// On a scheduler's start: the steps its instance id held before it died go back to Pending
    /// at once (counted as a failure, so that a step that kills its process ends in Error).
    /// Not fenced: the instance id is the identity, and only that instance may call this.
    async fn release_instance_claims(&self, p: ReleaseInstanceClaims) -> Result<ExpiryReport>;

    /// Takes or renews a named leader lease. `None` when another holder's lease is still live.
    async fn elect_leader(&self, p: ElectLeader) -> Result<Option<LeaderTerm>>;

    /// Gives a leader lease up at once, if `term` still holds it.
    async fn resign_leader(&self, term: &LeaderTerm) -> Result<()>;

    /// An operator sends a step in Error back to Pending with its failure count reset (P16).
    async fn resubmit_step(&self, p: ResubmitStep) -> Result<()>;

    /// An operator cancels a task: its pending and processing steps (and live child tasks) are
    /// cancelled, and its completed steps compensated when its workflow says so. The same as
    /// `operate_task` with `TaskCommand::Cancel`. Cancelling a task that has ended is a `Conflict`.
    async fn cancel_task(&self, p: CancelTask) -> Result<()>;

    /// An operator's command on a task (pause, resume, terminate, retry, rerun, skip, signal,
    /// cancel), recorded with who and why; the decider then runs in the same transaction.
    /// A command that does not apply to the task's state is a `Conflict` and changes nothing.
    async fn operate_task(&self, p: OperateTask) -> Result<()>;

    /// The reconciler's pass (C6), fenced by the leader's term: ends timed waits, fails tasks past
    /// their workflow's timeout, and decides again running tasks that have stalled. In the same
    /// transaction, the next time a timed wait ends or a live task's deadline passes (see
    /// [`Reconciled`]).
    async fn reconcile_pass(&self, p: Reconcile) -> Result<Reconciled>;

    /// A step heartbeat: moves the claim's complete-by on (see [`ExtendLease`]). Returns the new
    /// complete-by; a stale token is a `Conflict`.
    async fn extend_lease(&self, p: ExtendLease) -> Result<Timestamp>;

    /// Enqueues retry jobs (M1): each a task of its handler's one-step workflow, written with its
    /// step and `task.received` event; all of `p.jobs` in one transaction, or none. A unique key
    /// that exists (live or in history) with the same handler and params gives back that job.
    async fn enqueue_jobs(&self, p: EnqueueJobs) -> Result<Vec<Submitted>>;

    /// Jobs matching a search, newest first, from the hot tables or from history.
    async fn list_jobs(&self, q: JobQuery) -> Result<Vec<JobRecord>>;

    /// One job by id or key, live or archived.
    async fn find_job(&self, job: JobRef) -> Result<Option<JobRecord>>;

    /// Sends given-up jobs matching a filter back to run, from the hot tables and from history
    /// (a job in history is brought back first); with `dry_run`, only counts them.
    async fn resubmit_jobs(&self, p: ResubmitJobs) -> Result<ResubmitReport>;

    /// The archiver's pass (leader-only, fenced by the term): top-level tasks finished for
    /// `after` move to history with their children, steps and events, in one transaction per
    /// pass; history past `keep` is deleted. Live tasks are never touched.
    async fn archive(&self, p: Archive) -> Result<ArchiveReport>;

    /// Moves one finished top-level task, its children, steps and events to history at once
    /// (the tasks and steps moved are counted). `NotFound` when no live task has the id;
    /// `Conflict` when it has not finished, is a child (it moves with its parent), or has a
    /// child that still runs. Nothing is changed then.
    async fn archive_task(&self, p: ArchiveTask) -> Result<ArchiveReport>;

    /// Every registered definition, by name then version.
    async fn list_workflows(&self) -> Result<Vec<WorkflowSummary>>;

    async fn get_task(&self, id: TaskId) -> Result<Option<TaskDetail>>;

    async fn find_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>>;

    /// A task the archiver moved to history, with its steps and events as they were.
    async fn get_archived_task(&self, id: TaskId) -> Result<Option<TaskDetail>>;
    /// A task (from history when `archived`) with its steps and only its first `events` events:
    /// a view that pages the rest (`task_events`) need not read a long history to show a page.
    async fn get_task_head(&self, id: TaskId, archived: bool, events: u32) -> Result<Option<TaskDetail>>;

    async fn find_archived_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>>;

    /// A page of tasks matching a filter, newest first (by id); with `include_archived`, tasks in
    /// history too, in the same order.
    async fn list_tasks(&self, p: ListTasks) -> Result<Vec<TaskRecord>>;

    /// Counts for dashboards and the demo's summary.
    async fn summarize(&self) -> Result<Summary>;

    /// Tasks per state only: cheap enough to poll for progress while work runs.
    async fn task_counts(&self) -> Result<Vec<(TaskState, u64)>>;

    /// Records that a scheduler is alive until now + ttl, and returns every live scheduler
    /// (itself included), ordered by instance id.
    async fn heartbeat(&self, p: Heartbeat) -> Result<Vec<Member>>;

    /// A scheduler that stops says so, so that the others take its buckets at once.
    async fn sign_off(&self, instance: &InstanceId) -> Result<()>;

    /// Calls `wake` whenever any process queues work (a submission, a next step, a step released,
    /// resubmitted or sent back by a sweep or a failure, due now or later, or a timed wait
    /// started), until the returned subscription is dropped: sleeping schedulers and supervisors
    /// then read their next due times again. Best effort: they poll as well (rarely), so a
    /// missed call only delays work until the next poll. The default has no channel and never
    /// calls.
    fn subscribe_due_work(&self, _wake: WakeFn) -> Subscription {
        Subscription::none()
    }

    /// How many write transactions this store can usefully run at once: the engine's group commit
    /// runs that many writers unless told otherwise. SQLite has one writer; a server more.
    fn concurrent_writes(&self) -> usize {
        4
    }

    /// Whether a remote worker's waiting poll should have its claim run in the next submissions'
    /// transaction (`submit_tasks_and_claim`, the engine's handoff) rather than claim on its own
    /// after their commit: where the claim costs the submission's transaction less than it saves
    /// the poll. Measured on SQLite, yes; on PostgreSQL the claim before the COMMIT delayed the
    /// submission more than it sped up the pickup (`docs/performance.md`).
    fn hands_off_claims(&self) -> bool {
        false
    }

    // What the HTTP API (issue 16) needs: API tokens, task and event paging, bulk actions.

    /// Stores a new API token (its secret's hash, never the secret). A live token with the same
    /// name is a `Conflict`; a revoked one's name may be taken again.
    async fn create_api_token(&self, p: NewApiToken) -> Result<ApiToken>;

    /// The live token whose secret hashes to `secret_hash`; none for an unknown or revoked one.
    /// The lookup is by the hash, so no comparison of secrets happens here to be timed.
    async fn find_api_token(&self, secret_hash: &str) -> Result<Option<ApiToken>>;

    /// Every token, live and revoked, oldest first (never a hash).
    async fn list_api_tokens(&self) -> Result<Vec<ApiToken>>;

    /// Revokes the live token of this name; false when there is none.
    async fn revoke_api_token(&self, name: &str) -> Result<bool>;

    /// A page of one task's events (live or archived), oldest first: those with an id above
    /// `after`, at most `limit`. Empty for an unknown task. `get_task` reads every event of a task;
    /// this reads a task with very many a page at a time.
    async fn task_events(&self, p: TaskEvents) -> Result<Vec<EventRecord>>;

    /// The event log as a stream (issue 18): the settled events after `p.cursor` that match the
    /// filter, live or archived, in id order, at most `p.limit`, each with its task's key and
    /// workflow, and the cursor to read on from. Settled: no event with a smaller id can commit
    /// after this read, so a reader that goes on from the returned cursor (or from the last id it
    /// saw) misses nothing and repeats nothing, even when transactions commit out of id order.
    /// A read looks through at most `stream::MAX_EVENT_SCAN` ids.
    async fn read_events(&self, p: ReadEvents) -> Result<EventsRead>;

    /// Each agent type's queue (due, later, running, in Error, the oldest due step's time),
    /// counted over live agent steps only: cheap enough for every metrics scrape.
    async fn queue_stats(&self) -> Result<QueueStats>;

    /// An operator action (cancel, retry, resubmit the steps in Error) on every live task that
    /// matches a filter, oldest first, at most `limit` of them; with `dry_run`, only counts them.
    /// Each task is acted on in a transaction of its own, so the action is not atomic across
    /// tasks: a task whose state forbids it (or that changed meanwhile) is reported in the
    /// report's failures, unchanged, and the others go on. A call that fails as a whole (the
    /// store out of reach) may have acted on some tasks: running it again reports those as refused.
    async fn bulk_operate(&self, p: BulkOperate) -> Result<BulkReport>;

    // What remote workers (issue 17) need besides the claim, the replies and the heartbeat,
    // which are the scheduler's own verbs.

    /// Records that workers polled for agent types now (insert or move `last_seen_at` on), and
    /// deletes the rows not seen for `forget_after`, in one transaction.
    async fn record_workers_seen(&self, p: WorkersSeen) -> Result<()>;

    /// Every worker the registry holds, by agent type then worker id.
    async fn list_agent_workers(&self) -> Result<Vec<AgentWorker>>;

    // Status channels (P18): subscriptions and the outbox of their deliveries, which the store
    // writes itself beside every message's event (see `webhooks`).

    /// Makes a standing subscription (active).
    async fn create_subscription(&self, p: NewSubscription) -> Result<SubscriptionRecord>;

    /// Standing subscriptions, oldest first (a task's own are shown with its task).
    async fn list_subscriptions(&self) -> Result<Vec<SubscriptionRecord>>;

    /// One subscription, standing or a task's own.
    async fn get_subscription(&self, id: i64) -> Result<Option<SubscriptionRecord>>;

    /// Enables or disables a subscription; `NotFound` when there is none. Enabling clears a
    /// receiver's pause (429) too.
    async fn set_subscription_state(&self, p: SetSubscriptionState) -> Result<SubscriptionRecord>;

    /// Deletes a subscription and its undelivered (pending and dead) deliveries; false when there
    /// was none. Delivered ones stay, for the record.
    async fn delete_subscription(&self, id: i64) -> Result<bool>;

    /// The dispatcher's claim: due pending deliveries of active, unpaused subscriptions, oldest due
    /// first, each counted as an attempt and due again after the lease (so a dispatcher that dies
    /// mid-send loses nothing), each with a new fencing token.
    async fn claim_deliveries(&self, p: ClaimDeliveries) -> Result<ClaimedDeliveries>;

    /// Records what became of claimed deliveries, each fenced by its token; one bool per outcome,
    /// false for a stale token (the claim lapsed and the delivery was claimed again, or an
    /// operator moved it). A dead delivery writes an alert event on its task; a 410 disables the
    /// subscription; a 429 pauses it.
    async fn record_deliveries(&self, outcomes: Vec<DeliveryOutcome>) -> Result<Vec<bool>>;

    /// Deliveries matching a query, newest first.
    async fn list_deliveries(&self, q: DeliveryQuery) -> Result<Vec<DeliveryRecord>>;

    /// One delivery.
    async fn get_delivery(&self, id: i64) -> Result<Option<DeliveryRecord>>;

    /// Pending and dead deliveries, each counted up to `cap`, and the earliest due pending one.
    async fn delivery_backlog(&self, cap: u32) -> Result<DeliveryBacklog>;

    /// Sends deliveries back to pending, due now, attempts reset: the ids given (dead or
    /// delivered; pending ones are left as they are), or every dead one of a subscription.
    async fn redeliver(&self, p: Redeliver) -> Result<RedeliverReport>;

    /// Rings `wake` when deliveries may have been written by another process (this process's
    /// writes ring the engine's own bell). None by default: the dispatcher polls.
    fn subscribe_deliveries(&self, _wake: WakeFn) -> Subscription {
        Subscription::none()
    }

    /// Whether the store replicates, and whether a commit waits for a standby (issue 26). None
    /// for a store that does not replicate (SQLite).
    async fn replication(&self) -> Result<Option<Replication>> {
        Ok(None)
    }

    /// Where the named cursor stands (an event id: everything up to it was read), or none when it
    /// was never moved (see [`cursors`]).
    async fn read_cursor(&self, name: &str) -> Result<Option<i64>>;

    /// Moves the named cursor forward to `to`; a position behind where it stands changes nothing.
    async fn advance_cursor(&self, name: &str, to: i64) -> Result<()>;

    /// Keeps documents of a kind, replacing those of the same names (see [`documents`]), in one
    /// transaction.
    async fn put_documents(&self, kind: DocumentKind, docs: Vec<(String, serde_json::Value)>) -> Result<()>;

    /// The documents of a kind, by name, at most [`documents::MAX_DOCUMENTS_LISTED`].
    async fn list_documents(&self, kind: DocumentKind) -> Result<Vec<(String, serde_json::Value)>>;

    /// One document.
    async fn get_document(&self, kind: DocumentKind, name: &str) -> Result<Option<serde_json::Value>>;

    /// Forgets one document; false when there was none.
    async fn delete_document(&self, kind: DocumentKind, name: &str) -> Result<bool>;

    /// Writes a worker's log lines for a live step as `step.log` events of its task (see
    /// [`step_logs`]); `NotFound` when no live step has the id.
    async fn append_step_logs(&self, p: StepLogs) -> Result<()>;

    /// A step's log lines (its `step.log` events, live or archived), the oldest first, at most
    /// [`step_logs::MAX_LOG_LINES_READ`].
    async fn step_logs(&self, step: StepId) -> Result<Vec<EventRecord>>;

    /// How many events of each kind the log gained since the previous read (see [`rates`]).
    async fn count_events(&self, p: CountEvents) -> Result<EventCounts>;

    /// Running tasks without progress since a cutoff, oldest move first (see [`stalled`]).
    async fn stalled_tasks(&self, p: StalledTasks) -> Result<Vec<StalledTask>>;
}
