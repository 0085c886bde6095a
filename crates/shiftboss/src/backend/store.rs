//! The direct path (`--db`): the store answers, and its records become the API's wire types
//! through the server crate's own conversions.

use super::Backend;
use crate::target::DbTarget;
use anyhow::Context;
use async_trait::async_trait;
use serde_json::Value;
use shiftboss_core::TaskId;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_engine::{ClientConfig, JobClient, JobOptions};
use shiftboss_server::routes::agents::wire::{ReleaseAnswer, WorkersAnswer};
use shiftboss_server::routes::bulk::BulkDone;
use shiftboss_server::routes::jobs::Resubmitted;
use shiftboss_server::wire::{Acted, Event, Job, Registered, StepActed, Submitted, Task, TaskView, Workflow};
use shiftboss_store::{
    BulkOperate, JobQuery, JobRef, ListTasks, MAX_BULK_TASKS, OperateTask, RegisterOutcome, ReleaseInstanceClaims,
    ResubmitJobs, ResubmitStep, Store, SubmitTask, TaskDetail,
};
use std::sync::Arc;
use tokio::sync::OnceCell;

pub struct StoreBackend {
    db: DbTarget,
    /// Opened at the first call, so that a command that needs no store (a dry run of
    /// `workflows apply`) opens none, and each call chooses whether a missing store is made.
    store: OnceCell<Arc<dyn Store>>,
    /// The config file's client settings, for enqueueing; an error in them fails an enqueue only.
    client: Result<ClientConfig, String>,
}

impl StoreBackend {
    pub fn new(db: DbTarget, client: anyhow::Result<ClientConfig>) -> StoreBackend {
        StoreBackend { db, store: OnceCell::new(), client: client.map_err(|e| format!("{e:#}")) }
    }

    /// The store; `create` makes a missing one (only registering does: for looking at and
    /// acting on tasks, a mistyped path is an error rather than a new empty database).
    async fn store(&self, create: bool) -> anyhow::Result<&Arc<dyn Store>> {
        self.store
            .get_or_try_init(async || {
                let store = self.db.open(create).await?;
                anyhow::Ok(crate::patient::Patient::wrap(store, crate::target::bounds().wait))
            })
            .await
    }

    /// A task's detail by id or key: the hot tables first, then history.
    async fn detail(&self, task: &str) -> anyhow::Result<Option<TaskDetail>> {
        let store = self.store(false).await?;
        let id = match task.parse::<i64>() {
            Ok(id) => Some(TaskId(id)),
            Err(_) => store.find_task_by_key(task).await?.map(|t| t.id),
        };
        if let Some(id) = id
            && let Some(d) = store.get_task(id).await?
        {
            return Ok(Some(d));
        }
        let id = match task.parse::<i64>() {
            Ok(id) => Some(TaskId(id)),
            Err(_) => store.find_archived_task_by_key(task).await?.map(|t| t.id),
        };
        match id {
            Some(id) => Ok(store.get_archived_task(id).await?),
            None => Ok(None),
        }
    }
}

#[async_trait]
impl Backend for StoreBackend {
    fn actor(&self, given: Option<String>) -> anyhow::Result<String> {
        Ok(given.unwrap_or_else(crate::commands::default_actor))
    }

    fn max_bulk(&self) -> u32 {
        MAX_BULK_TASKS
    }

    async fn register_workflow(&self, def: &WorkflowDef, dry_run: bool) -> anyhow::Result<Registered> {
        if dry_run {
            // Read and checked already (`read_definition`): a dry run opens no store.
            return Ok(Registered::new(def, "valid", Vec::new()));
        }
        // Made if missing: a definition may be registered before the first `serve`.
        let outcome = match self.store(true).await?.register_workflow(def).await? {
            RegisterOutcome::Created => "created",
            RegisterOutcome::Unchanged => "unchanged",
        };
        Ok(Registered::new(def, outcome, Vec::new()))
    }

    async fn list_workflows(&self) -> anyhow::Result<Vec<Workflow>> {
        let all = self.store(false).await?.list_workflows().await?;
        Ok(all.into_iter().map(Workflow::from).collect())
    }

    async fn get_workflow(&self, name: &str, version: Option<u32>) -> anyhow::Result<Option<WorkflowDef>> {
        Ok(self.store(false).await?.get_workflow(name, version).await?)
    }

    async fn submit_task(&self, task: SubmitTask) -> anyhow::Result<Submitted> {
        let key = task.key.clone();
        let s = self.store(false).await?.submit_task(task).await?;
        Ok(Submitted { id: s.task_id.to_string(), key, created: s.created })
    }

    async fn list_tasks(&self, p: ListTasks) -> anyhow::Result<Vec<Task>> {
        let tasks = self.store(false).await?.list_tasks(p).await?;
        Ok(tasks.into_iter().map(Task::from).collect())
    }

    async fn task(&self, task: &str) -> anyhow::Result<Option<TaskView>> {
        Ok(self.detail(task).await?.map(|d| TaskView::new(d, usize::MAX)))
    }

    async fn task_id(&self, task: &str) -> anyhow::Result<Option<TaskId>> {
        if let Ok(id) = task.parse::<i64>() {
            return Ok(Some(TaskId(id)));
        }
        Ok(self.store(false).await?.find_task_by_key(task).await?.map(|t| t.id))
    }

    async fn task_events(&self, id: TaskId) -> anyhow::Result<Vec<Event>> {
        let detail = self.store(false).await?.get_task(id).await?;
        Ok(detail.map(|d| d.events.into_iter().map(Event::from).collect()).unwrap_or_default())
    }

    async fn operate(&self, p: OperateTask) -> anyhow::Result<Acted> {
        let store = self.store(false).await?;
        let (task_id, action) = (p.task_id, p.command.as_str().to_owned());
        store.operate_task(p).await?;
        let state = store.get_task(task_id).await?.map(|d| d.task.state.as_str().to_owned()).unwrap_or_default();
        Ok(Acted { id: task_id.to_string(), action, state })
    }

    async fn resubmit_step(&self, p: ResubmitStep) -> anyhow::Result<StepActed> {
        let id = p.step_id.to_string();
        self.store(false).await?.resubmit_step(p).await?;
        Ok(StepActed { id, action: "resubmit".into() })
    }

    async fn bulk(&self, p: BulkOperate) -> anyhow::Result<BulkDone> {
        let (command, dry_run) = (p.command, p.dry_run);
        let report = self.store(false).await?.bulk_operate(p).await?;
        Ok(BulkDone::new(command, dry_run, report))
    }

    async fn enqueue_job(
        &self,
        handler: &str,
        params: Value,
        options: JobOptions,
        actor: String,
    ) -> anyhow::Result<(Submitted, Job)> {
        let store = self.store(false).await?;
        let config = self.client.clone().map_err(anyhow::Error::msg)?;
        let key = options.unique_key.clone().unwrap_or_default();
        let s = JobClient::new(store.clone(), config, actor)?.enqueue(handler, params, options).await?;
        let job = store.find_job(JobRef::Id(s.task_id)).await?.context("the job just enqueued is missing")?;
        Ok((Submitted { id: s.task_id.to_string(), key, created: s.created }, Job::from(job)))
    }

    async fn list_jobs(&self, q: JobQuery) -> anyhow::Result<Vec<Job>> {
        let jobs = self.store(false).await?.list_jobs(q).await?;
        Ok(jobs.into_iter().map(Job::from).collect())
    }

    async fn job(&self, job: &str) -> anyhow::Result<Option<Job>> {
        let store = self.store(false).await?;
        if let Ok(id) = job.parse::<i64>()
            && let Some(j) = store.find_job(JobRef::Id(TaskId(id))).await?
        {
            return Ok(Some(Job::from(j)));
        }
        Ok(store.find_job(JobRef::Key(job.to_owned())).await?.map(Job::from))
    }

    async fn resubmit_jobs(&self, p: ResubmitJobs) -> anyhow::Result<Resubmitted> {
        let dry_run = p.dry_run;
        let r = self.store(false).await?.resubmit_jobs(p).await?;
        Ok(Resubmitted { matched: r.matched, resubmitted: r.resubmitted, dry_run })
    }

    async fn create_subscription(
        &self,
        body: shiftboss_server::routes::webhooks::NewSubscriptionBody,
    ) -> anyhow::Result<shiftboss_server::routes::webhooks::CreatedSubscription> {
        let (p, secret) = shiftboss_server::routes::webhooks::new_subscription(body).map_err(anyhow::Error::msg)?;
        let s = self.store(false).await?.create_subscription(p).await?;
        Ok(shiftboss_server::routes::webhooks::CreatedSubscription { subscription: s.into(), secret })
    }

    async fn list_subscriptions(&self) -> anyhow::Result<Vec<shiftboss_server::routes::webhooks::SubscriptionView>> {
        Ok(self.store(false).await?.list_subscriptions().await?.into_iter().map(Into::into).collect())
    }

    async fn list_deliveries(
        &self,
        q: shiftboss_store::DeliveryQuery,
    ) -> anyhow::Result<Vec<shiftboss_server::routes::webhooks::DeliveryView>> {
        Ok(self.store(false).await?.list_deliveries(q).await?.into_iter().map(Into::into).collect())
    }

    async fn redeliver(
        &self,
        p: shiftboss_store::Redeliver,
    ) -> anyhow::Result<shiftboss_server::routes::webhooks::Redelivered> {
        let dry_run = p.dry_run;
        let r = self.store(false).await?.redeliver(p).await?;
        Ok(shiftboss_server::routes::webhooks::Redelivered { ids: r.ids.iter().map(i64::to_string).collect(), dry_run })
    }

    async fn list_workers(&self) -> anyhow::Result<WorkersAnswer> {
        let store = self.store(false).await?;
        let rows = store.list_agent_workers().await?;
        Ok(WorkersAnswer::from_rows(rows, store.now().await?))
    }

    async fn release_worker(&self, worker: &str) -> anyhow::Result<ReleaseAnswer> {
        let instance = shiftboss_store::worker_instance(worker)?;
        // `serve` runs with the default policies (the library's embedders may set others).
        let p = ReleaseInstanceClaims { instance, policies: Default::default() };
        Ok(self.store(false).await?.release_instance_claims(p).await?.into())
    }
}
