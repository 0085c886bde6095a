//! The API path (`--server`): each call is the route the server documents for it, its request
//! the server crate's own request type, its answer the server crate's own wire type. Listings
//! larger than the API's page are read page by page, and a task's events to the end, so that the
//! answer is the whole of what the direct path reads.

use super::client::{ApiClient, ClientError, ServerTarget};
use super::{ACTOR_OVER_API, Backend};
use anyhow::bail;
use async_trait::async_trait;
use serde_json::Value;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_engine::JobOptions;
use shiftboss_server::limits::MAX_PAGE;
use shiftboss_server::routes::agents::wire::{ReleaseAnswer, WorkersAnswer};
use shiftboss_server::routes::bulk::{BulkDone, BulkRequest, MAX_BULK};
use shiftboss_server::routes::jobs::{NewJob, ResubmitRequest, Resubmitted};
use shiftboss_server::routes::tasks::FilterParams;
use shiftboss_server::wire::{
    self, Acted, Event, EventPage, Job, JobPage, Reason, Registered, Rerun, Signal, Skip, StepActed, Submitted, Task,
    TaskPage, TaskView, Workflow,
};
use shiftboss_store::{
    BulkOperate, JobPlace, JobQuery, ListTasks, OperateTask, ResubmitJobs, ResubmitStep, SubmitTask, TaskCommand,
    TaskFilter,
};

pub struct ApiBackend {
    api: ApiClient,
    /// Items asked for per page: the API's most, but for tests of the paging itself.
    page: u32,
}

impl ApiBackend {
    pub fn new(target: &ServerTarget) -> Result<ApiBackend, ClientError> {
        Ok(ApiBackend { api: ApiClient::new(target)?, page: MAX_PAGE })
    }

    /// Reads in pages of `n` (1 to the API's most): a test sees the paging at work without a
    /// thousand tasks.
    pub fn page_size(mut self, n: u32) -> ApiBackend {
        self.page = n.clamp(1, MAX_PAGE);
        self
    }

    /// A task by id or key, with its first page of events.
    async fn task_first_page(&self, task: &str) -> Result<Option<TaskView>, ClientError> {
        let q = [("events_limit", self.page.to_string())];
        match wire::parse_id(task) {
            Some(_) => self.api.find(&["v1", "tasks", task], &q).await,
            None => self.api.find(&["v1", "tasks", "by-key", task], &q).await,
        }
    }

    /// A task's events after the cursor `after` (from the start when none), to the end.
    async fn events_from(&self, id: &str, mut after: Option<String>) -> Result<Vec<Event>, ClientError> {
        let mut out = Vec::new();
        loop {
            let mut q = vec![("limit", self.page.to_string())];
            if let Some(a) = &after {
                q.push(("after", a.clone()));
            }
            let page: EventPage = self.api.get(&["v1", "tasks", id, "events"], &q).await?;
            out.extend(page.items);
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }
}

/// A time as the API takes it.
fn time(t: Option<Timestamp>) -> Option<String> {
    t.map(wire::time)
}

/// The store's task filter as the API's.
fn filter_params(f: TaskFilter) -> FilterParams {
    FilterParams {
        state: f.state.map(|s| s.as_str().to_owned()),
        workflow: f.workflow,
        key_prefix: f.key_prefix,
        created_from: time(f.created_from),
        created_to: time(f.created_to),
        updated_from: time(f.updated_from),
        updated_to: time(f.updated_to),
    }
}

/// Query parameters, leaving out those not given.
fn query(pairs: Vec<(&'static str, Option<String>)>) -> Vec<(&'static str, String)> {
    pairs.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect()
}

#[async_trait]
impl Backend for ApiBackend {
    fn actor(&self, given: Option<String>) -> anyhow::Result<String> {
        if given.is_some() {
            bail!(ACTOR_OVER_API);
        }
        // Not sent: the server takes the token's name.
        Ok(String::new())
    }

    fn max_bulk(&self) -> u32 {
        MAX_BULK
    }

    async fn register_workflow(&self, def: &WorkflowDef, dry_run: bool) -> anyhow::Result<Registered> {
        let path: &[&str] = if dry_run { &["v1", "workflows", "validate"] } else { &["v1", "workflows"] };
        Ok(self.api.post(path, &[], def).await?)
    }

    async fn list_workflows(&self) -> anyhow::Result<Vec<Workflow>> {
        Ok(self.api.get(&["v1", "workflows"], &[]).await?)
    }

    async fn get_workflow(&self, name: &str, version: Option<u32>) -> anyhow::Result<Option<WorkflowDef>> {
        Ok(match version {
            Some(v) => self.api.find(&["v1", "workflows", name, "versions", &v.to_string()], &[]).await?,
            None => self.api.find(&["v1", "workflows", name], &[]).await?,
        })
    }

    async fn submit_task(&self, task: SubmitTask) -> anyhow::Result<Submitted> {
        let body = wire::SubmitTask {
            domains: task.domains,
            notify: None,
            key: task.key,
            workflow: task.workflow,
            version: task.version,
            input: Some(task.input),
            priority: Some(task.priority),
        };
        Ok(self.api.post(&["v1", "tasks"], &[], &body).await?)
    }

    async fn list_tasks(&self, p: ListTasks) -> anyhow::Result<Vec<Task>> {
        let f = filter_params(p.filter);
        let mut out: Vec<Task> = Vec::new();
        let mut before = p.before.map(|b| b.to_string());
        while out.len() < p.limit as usize {
            let want = (p.limit as usize - out.len()).min(self.page as usize);
            let q = query(vec![
                ("state", f.state.clone()),
                ("workflow", f.workflow.clone()),
                ("key_prefix", f.key_prefix.clone()),
                ("created_from", f.created_from.clone()),
                ("created_to", f.created_to.clone()),
                ("updated_from", f.updated_from.clone()),
                ("updated_to", f.updated_to.clone()),
                ("archived", p.include_archived.then(|| "true".to_owned())),
                ("before", before.clone()),
                ("limit", Some(want.to_string())),
            ]);
            let page: TaskPage = self.api.get(&["v1", "tasks"], &q).await?;
            out.extend(page.items);
            match page.next {
                Some(n) => before = Some(n),
                None => break,
            }
        }
        Ok(out)
    }

    async fn task(&self, task: &str) -> anyhow::Result<Option<TaskView>> {
        let Some(mut view) = self.task_first_page(task).await? else { return Ok(None) };
        if let Some(after) = view.events_next.take() {
            let rest = self.events_from(&view.task.id, Some(after)).await?;
            view.events.extend(rest);
        }
        Ok(Some(view))
    }

    async fn task_id(&self, task: &str) -> anyhow::Result<Option<TaskId>> {
        if let Ok(id) = task.parse::<i64>() {
            return Ok(Some(TaskId(id)));
        }
        let view: Option<TaskView> =
            self.api.find(&["v1", "tasks", "by-key", task], &[("events_limit", "0".into())]).await?;
        Ok(view.and_then(|v| wire::task_id(&v.task.id)))
    }

    async fn task_events(&self, id: TaskId) -> anyhow::Result<Vec<Event>> {
        match self.events_from(&id.to_string(), None).await {
            Ok(events) => Ok(events),
            Err(ClientError::Problem { status: 404, .. }) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    async fn operate(&self, p: OperateTask) -> anyhow::Result<Acted> {
        let id = p.task_id.to_string();
        let reason = p.reason;
        let acted = match p.command {
            TaskCommand::Rerun { from } => {
                self.api.post(&["v1", "tasks", &id, "rerun"], &[], &Rerun { from, reason }).await?
            }
            TaskCommand::Skip { step, output } => {
                self.api.post(&["v1", "tasks", &id, "skip"], &[], &Skip { step, output, reason }).await?
            }
            TaskCommand::Signal { name, payload } => {
                self.api.post(&["v1", "tasks", &id, "signal"], &[], &Signal { name, payload, reason }).await?
            }
            simple => self.api.post(&["v1", "tasks", &id, simple.as_str()], &[], &Reason { reason }).await?,
        };
        Ok(acted)
    }

    async fn resubmit_step(&self, p: ResubmitStep) -> anyhow::Result<StepActed> {
        let id = p.step_id.to_string();
        Ok(self.api.post(&["v1", "steps", &id, "resubmit"], &[], &Reason { reason: p.reason }).await?)
    }

    async fn bulk(&self, p: BulkOperate) -> anyhow::Result<BulkDone> {
        let body =
            BulkRequest { filter: filter_params(p.filter), reason: p.reason, dry_run: p.dry_run, limit: Some(p.limit) };
        Ok(self.api.post(&["v1", "tasks", "bulk", p.command.as_str()], &[], &body).await?)
    }

    async fn enqueue_job(
        &self,
        handler: &str,
        params: Value,
        options: JobOptions,
        _actor: String,
    ) -> anyhow::Result<(Submitted, Job)> {
        let body = NewJob {
            handler: handler.to_owned(),
            params: Some(params),
            key: options.unique_key,
            due_at: time(options.due_at),
            delay: options.delay,
            retry: options.retry,
            timeout: options.timeout,
            priority: options.priority,
            bucket: options.bucket,
        };
        let s: Submitted = self.api.post(&["v1", "jobs"], &[], &body).await?;
        let job: Job = self.api.get(&["v1", "jobs", &s.id], &[]).await?;
        Ok((s, job))
    }

    async fn list_jobs(&self, q: JobQuery) -> anyhow::Result<Vec<Job>> {
        let mut out: Vec<Job> = Vec::new();
        let mut before = q.before.map(|b| b.to_string());
        while out.len() < q.limit as usize {
            let want = (q.limit as usize - out.len()).min(self.page as usize);
            let params = query(vec![
                ("history", (q.place == JobPlace::History).then(|| "true".to_owned())),
                ("handler", q.handler.clone()),
                ("state", q.state.map(|s| s.as_str().to_owned())),
                ("from", time(q.from)),
                ("to", time(q.to)),
                ("reason", q.reason.clone()),
                ("before", before.clone()),
                ("limit", Some(want.to_string())),
            ]);
            let page: JobPage = self.api.get(&["v1", "jobs"], &params).await?;
            out.extend(page.items);
            match page.next {
                Some(n) => before = Some(n),
                None => break,
            }
        }
        Ok(out)
    }

    async fn job(&self, job: &str) -> anyhow::Result<Option<Job>> {
        if wire::parse_id(job).is_some()
            && let Some(j) = self.api.find(&["v1", "jobs", job], &[]).await?
        {
            return Ok(Some(j));
        }
        Ok(self.api.find(&["v1", "jobs", "by-key", job], &[]).await?)
    }

    async fn resubmit_jobs(&self, p: ResubmitJobs) -> anyhow::Result<Resubmitted> {
        let q = p.query;
        let body = ResubmitRequest {
            id: q.id.map(|i| i.to_string()),
            handler: q.handler,
            from: time(q.from),
            to: time(q.to),
            reason_contains: q.reason,
            dry_run: p.dry_run,
            limit: Some(q.limit),
            reason: p.reason,
        };
        Ok(self.api.post(&["v1", "jobs", "resubmit"], &[], &body).await?)
    }

    async fn create_subscription(
        &self,
        body: shiftboss_server::routes::webhooks::NewSubscriptionBody,
    ) -> anyhow::Result<shiftboss_server::routes::webhooks::CreatedSubscription> {
        Ok(self.api.post(&["v1", "subscriptions"], &[], &body).await?)
    }

    async fn list_subscriptions(&self) -> anyhow::Result<Vec<shiftboss_server::routes::webhooks::SubscriptionView>> {
        let list: shiftboss_server::routes::webhooks::SubscriptionList =
            self.api.get(&["v1", "subscriptions"], &[]).await?;
        Ok(list.items)
    }

    async fn list_deliveries(
        &self,
        q: shiftboss_store::DeliveryQuery,
    ) -> anyhow::Result<Vec<shiftboss_server::routes::webhooks::DeliveryView>> {
        let mut out = Vec::new();
        let mut before = q.before.map(|b| b.to_string());
        while out.len() < q.limit as usize {
            let want = (q.limit as usize - out.len()).min(self.page as usize);
            let params = query(vec![
                ("state", q.state.map(|s| s.as_str().to_owned())),
                ("subscription", q.subscription.map(|s| s.to_string())),
                ("task", q.task.map(|t| t.to_string())),
                ("before", before.clone()),
                ("limit", Some(want.to_string())),
            ]);
            let page: shiftboss_server::routes::webhooks::DeliveryPage =
                self.api.get(&["v1", "deliveries"], &params).await?;
            out.extend(page.items);
            match page.next {
                Some(n) => before = Some(n),
                None => break,
            }
        }
        Ok(out)
    }

    async fn redeliver(
        &self,
        p: shiftboss_store::Redeliver,
    ) -> anyhow::Result<shiftboss_server::routes::webhooks::Redelivered> {
        let body = shiftboss_server::routes::webhooks::RedeliverBody {
            ids: p.ids.iter().map(i64::to_string).collect(),
            subscription: p.subscription.map(|s| s.to_string()),
            dry_run: p.dry_run,
        };
        Ok(self.api.post(&["v1", "deliveries", "redeliver"], &[], &body).await?)
    }

    async fn list_workers(&self) -> anyhow::Result<WorkersAnswer> {
        Ok(self.api.get(&["v1", "agents", "workers"], &[]).await?)
    }

    async fn release_worker(&self, worker: &str) -> anyhow::Result<ReleaseAnswer> {
        Ok(self.api.post(&["v1", "agents", "workers", worker, "release"], &[], &serde_json::json!({})).await?)
    }
}
