//! The operator backend: what the operator commands (workflows, tasks, steps, jobs) ask of
//! shiftboss, answered either by the state store itself (`--db`, [`StoreBackend`]) or by a
//! running server's HTTP API (`--server`, [`ApiBackend`]).
//!
//! Both answer in the API's own wire types (`shiftboss_server::wire`): the store's records go
//! through the server crate's conversions on the direct path, and come as the server's JSON on
//! the other. The commands render those values with one set of printers, so a command prints the
//! same whichever way it went, by construction rather than by two printers kept in step.
//!
//! The inputs are the store's own parameter types (what the commands have always built): the
//! direct path hands them to the store, the API path maps them to the request the route takes.

pub mod api;
pub mod client;
pub mod store;

pub use api::ApiBackend;
pub use client::{ApiClient, ClientError, ServerTarget};
pub use store::StoreBackend;

use async_trait::async_trait;
use serde_json::Value;
use shiftboss_core::TaskId;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_engine::JobOptions;
use shiftboss_server::routes::agents::wire::{ReleaseAnswer, WorkersAnswer};
use shiftboss_server::routes::bulk::BulkDone;
use shiftboss_server::routes::jobs::Resubmitted;
use shiftboss_server::routes::webhooks::{
    CreatedSubscription, DeliveryView, NewSubscriptionBody, Redelivered, SubscriptionView,
};
use shiftboss_server::wire::{Acted, Event, Job, Registered, StepActed, Submitted, Task, TaskView, Workflow};
use shiftboss_store::{
    BulkOperate, DeliveryQuery, JobQuery, ListTasks, OperateTask, Redeliver, ResubmitJobs, ResubmitStep, SubmitTask,
};

/// What the operator commands need, answered in the API's wire types.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Who an action is recorded as. On the store, `--actor` or else the login name; over the
    /// API the server records the token's name, so an `--actor` is refused there rather than
    /// silently dropped.
    fn actor(&self, given: Option<String>) -> anyhow::Result<String>;

    /// The most tasks one bulk action may take (the default of `tasks bulk --limit`).
    fn max_bulk(&self) -> u32;

    /// Registers a definition, or with `dry_run` only checks it.
    async fn register_workflow(&self, def: &WorkflowDef, dry_run: bool) -> anyhow::Result<Registered>;
    async fn list_workflows(&self) -> anyhow::Result<Vec<Workflow>>;
    /// A registered definition: the newest version unless one is named.
    async fn get_workflow(&self, name: &str, version: Option<u32>) -> anyhow::Result<Option<WorkflowDef>>;

    async fn submit_task(&self, task: SubmitTask) -> anyhow::Result<Submitted>;
    /// Tasks, newest first, at most `p.limit` of them.
    async fn list_tasks(&self, p: ListTasks) -> anyhow::Result<Vec<Task>>;
    /// A task by id (the hot tables, then history) or by key, with every one of its events.
    async fn task(&self, task: &str) -> anyhow::Result<Option<TaskView>>;
    /// The id of a task named by its id or its key (a number is taken as an id).
    async fn task_id(&self, task: &str) -> anyhow::Result<Option<TaskId>>;
    /// A task's events, oldest first, every one of them (none for an unknown task).
    async fn task_events(&self, id: TaskId) -> anyhow::Result<Vec<Event>>;
    /// An operator's action on a task, and the task's state after it.
    async fn operate(&self, p: OperateTask) -> anyhow::Result<Acted>;
    async fn resubmit_step(&self, p: ResubmitStep) -> anyhow::Result<StepActed>;
    async fn bulk(&self, p: BulkOperate) -> anyhow::Result<BulkDone>;

    /// Enqueues a job; what the enqueue did, and the job as it now stands.
    async fn enqueue_job(
        &self,
        handler: &str,
        params: Value,
        options: JobOptions,
        actor: String,
    ) -> anyhow::Result<(Submitted, Job)>;
    /// Jobs, newest first, at most `q.limit` of them.
    async fn list_jobs(&self, q: JobQuery) -> anyhow::Result<Vec<Job>>;
    /// A job, live or archived, by id, or by key when the text is not a number or no job has
    /// that id.
    async fn job(&self, job: &str) -> anyhow::Result<Option<Job>>;
    async fn resubmit_jobs(&self, p: ResubmitJobs) -> anyhow::Result<Resubmitted>;

    /// Makes a standing subscription; the answer holds its secret, shown this once.
    async fn create_subscription(&self, body: NewSubscriptionBody) -> anyhow::Result<CreatedSubscription>;
    /// The standing subscriptions, oldest first.
    async fn list_subscriptions(&self) -> anyhow::Result<Vec<SubscriptionView>>;
    /// Deliveries, newest first, at most `q.limit` of them.
    async fn list_deliveries(&self, q: DeliveryQuery) -> anyhow::Result<Vec<DeliveryView>>;
    async fn redeliver(&self, p: Redeliver) -> anyhow::Result<Redelivered>;

    /// The remote workers seen polling, per agent type.
    async fn list_workers(&self) -> anyhow::Result<WorkersAnswer>;
    /// Takes back the steps a remote worker holds (see `POST /v1/agents/workers/{id}/release`).
    async fn release_worker(&self, worker: &str) -> anyhow::Result<ReleaseAnswer>;
}

/// The message for `--actor` given with `--server`.
pub const ACTOR_OVER_API: &str =
    "--actor does not apply with --server: the server records the token's name as the actor (leave --actor out)";
