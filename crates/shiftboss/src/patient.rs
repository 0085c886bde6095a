//! Commands ride out a short store outage (a PostgreSQL failing over, P11): a call that fails as
//! `Unavailable` is tried again with backoff for up to `--store-wait`, and the command says once,
//! on standard error, what it waits for. Other errors (bad input, a conflict, an incompatible
//! schema) are answered at once.
//!
//! A write whose answer was lost may have committed before it is tried again. Every command's
//! write is safe to repeat in that sense: a submission or an enqueue with a key finds its own
//! task; an operator action found already done is refused with the task's state, which says so.
//! An enqueue without a key is the exception: it may enqueue the job twice, as any client that
//! retries without a key would.
//!
//! `serve` does not use [`Patient`]: its roles retry on their own, for as long as they run, and
//! must see each failure to say so and to race their shutdown.

use async_trait::async_trait;
use shiftboss_core::buckets::Member;
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskId, TaskState, Timestamp};
use shiftboss_store::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Tries calls again while the store is out of reach, for up to a bound per call.
#[derive(Debug)]
pub struct Waiter {
    wait: Duration,
    /// True while an outage was reported and no call has succeeded since: one line per outage.
    said: AtomicBool,
}

impl Waiter {
    pub fn new(wait: Duration) -> Waiter {
        Waiter { wait, said: AtomicBool::new(false) }
    }

    /// Runs `call` until it succeeds, fails for good, or the store has been out of reach for the
    /// bound; `what` names the call in the one line said while waiting.
    pub async fn retry<T, F, Fut>(&self, what: &str, mut call: F) -> std::result::Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, StoreError>>,
    {
        let started = Instant::now();
        let mut backoff = Duration::from_millis(100);
        loop {
            match call().await {
                Ok(v) => {
                    if self.said.swap(false, Ordering::Relaxed) {
                        eprintln!("the state store answers again ({what})");
                    }
                    return Ok(v);
                }
                Err(e) if e.is_transient() && started.elapsed() < self.wait => {
                    if !self.said.swap(true, Ordering::Relaxed) {
                        eprintln!(
                            "waiting up to {} for the state store ({what}): {e}",
                            humantime::format_duration(self.wait)
                        );
                    }
                    let left = self.wait.saturating_sub(started.elapsed());
                    tokio::time::sleep(backoff.min(left)).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                Err(e) if e.is_transient() && !self.wait.is_zero() => {
                    return Err(StoreError::Unavailable(format!(
                        "{} (gave up after waiting {} for the store; --store-wait sets how long)",
                        unwrap_unavailable(e),
                        humantime::format_duration(self.wait)
                    )));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

fn unwrap_unavailable(e: StoreError) -> String {
    match e {
        StoreError::Unavailable(m) => m,
        other => other.to_string(),
    }
}

/// A store whose every call rides out an outage (see the module's note).
pub struct Patient {
    inner: Arc<dyn Store>,
    waiter: Waiter,
}

impl Patient {
    /// `store` with calls tried again for up to `wait`; a zero `wait` returns `store` itself.
    pub fn wrap(store: Arc<dyn Store>, wait: Duration) -> Arc<dyn Store> {
        if wait.is_zero() {
            return store;
        }
        Arc::new(Patient { inner: store, waiter: Waiter::new(wait) })
    }
}

/// Forwards a call to the inner store through the waiter; the parameters are cloned per try.
macro_rules! patiently {
    ($self:ident, $what:literal, $call:expr) => {
        $self.waiter.retry($what, || $call).await
    };
}

#[async_trait]
impl Store for Patient {
    async fn now(&self) -> Result<Timestamp> {
        patiently!(self, "reading the time", self.inner.now())
    }
    async fn register_workflow(&self, def: &WorkflowDef) -> Result<RegisterOutcome> {
        patiently!(self, "registering a workflow", self.inner.register_workflow(def))
    }
    async fn get_workflow(&self, name: &str, version: Option<u32>) -> Result<Option<WorkflowDef>> {
        patiently!(self, "reading a workflow", self.inner.get_workflow(name, version))
    }
    async fn submit_task(&self, p: SubmitTask) -> Result<Submitted> {
        patiently!(self, "submitting a task", self.inner.submit_task(p.clone()))
    }
    async fn submit_tasks(&self, tasks: Vec<SubmitTask>) -> Result<Vec<Submitted>> {
        patiently!(self, "submitting tasks", self.inner.submit_tasks(tasks.clone()))
    }
    async fn submit_tasks_and_claim(
        &self,
        tasks: Vec<SubmitTask>,
        claims: Vec<ClaimDueSteps>,
    ) -> Result<SubmittedAndClaimed> {
        patiently!(self, "submitting tasks", self.inner.submit_tasks_and_claim(tasks.clone(), claims.clone()))
    }
    async fn claim_due_work(&self, p: ClaimDueSteps) -> Result<ClaimedWork> {
        patiently!(self, "claiming steps", self.inner.claim_due_work(p.clone()))
    }
    async fn record_replies(&self, p: RecordReplies) -> Result<Vec<ReplyOutcome>> {
        patiently!(self, "recording replies", self.inner.record_replies(p.clone()))
    }
    async fn sweep(&self, p: ExpireLeases) -> Result<Swept> {
        patiently!(self, "sweeping leases", self.inner.sweep(p.clone()))
    }
    async fn release_instance_claims(&self, p: ReleaseInstanceClaims) -> Result<ExpiryReport> {
        patiently!(self, "releasing claims", self.inner.release_instance_claims(p.clone()))
    }
    async fn elect_leader(&self, p: ElectLeader) -> Result<Option<LeaderTerm>> {
        patiently!(self, "electing a leader", self.inner.elect_leader(p.clone()))
    }
    async fn resign_leader(&self, term: &LeaderTerm) -> Result<()> {
        patiently!(self, "resigning", self.inner.resign_leader(term))
    }
    async fn resubmit_step(&self, p: ResubmitStep) -> Result<()> {
        patiently!(self, "resubmitting a step", self.inner.resubmit_step(p.clone()))
    }
    async fn cancel_task(&self, p: CancelTask) -> Result<()> {
        patiently!(self, "cancelling a task", self.inner.cancel_task(p.clone()))
    }
    async fn operate_task(&self, p: OperateTask) -> Result<()> {
        patiently!(self, "acting on a task", self.inner.operate_task(p.clone()))
    }
    async fn reconcile_pass(&self, p: Reconcile) -> Result<Reconciled> {
        patiently!(self, "reconciling", self.inner.reconcile_pass(p.clone()))
    }
    async fn extend_lease(&self, p: ExtendLease) -> Result<Timestamp> {
        patiently!(self, "extending a lease", self.inner.extend_lease(p.clone()))
    }
    async fn enqueue_jobs(&self, p: EnqueueJobs) -> Result<Vec<Submitted>> {
        patiently!(self, "enqueueing jobs", self.inner.enqueue_jobs(p.clone()))
    }
    async fn list_jobs(&self, q: JobQuery) -> Result<Vec<JobRecord>> {
        patiently!(self, "listing jobs", self.inner.list_jobs(q.clone()))
    }
    async fn find_job(&self, job: JobRef) -> Result<Option<JobRecord>> {
        patiently!(self, "reading a job", self.inner.find_job(job.clone()))
    }
    async fn resubmit_jobs(&self, p: ResubmitJobs) -> Result<ResubmitReport> {
        patiently!(self, "resubmitting jobs", self.inner.resubmit_jobs(p.clone()))
    }
    async fn archive(&self, p: Archive) -> Result<ArchiveReport> {
        patiently!(self, "archiving", self.inner.archive(p.clone()))
    }
    // Tried again after a lost answer, a task already moved is NotFound: the caller sees it gone.
    async fn archive_task(&self, p: ArchiveTask) -> Result<ArchiveReport> {
        patiently!(self, "archiving a task", self.inner.archive_task(p.clone()))
    }
    async fn list_workflows(&self) -> Result<Vec<WorkflowSummary>> {
        patiently!(self, "listing workflows", self.inner.list_workflows())
    }
    async fn get_task(&self, id: TaskId) -> Result<Option<TaskDetail>> {
        patiently!(self, "reading a task", self.inner.get_task(id))
    }
    async fn find_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>> {
        patiently!(self, "finding a task", self.inner.find_task_by_key(key))
    }
    async fn get_archived_task(&self, id: TaskId) -> Result<Option<TaskDetail>> {
        patiently!(self, "reading an archived task", self.inner.get_archived_task(id))
    }
    async fn get_task_head(&self, id: TaskId, archived: bool, events: u32) -> Result<Option<TaskDetail>> {
        patiently!(self, "reading a task", self.inner.get_task_head(id, archived, events))
    }
    async fn find_archived_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>> {
        patiently!(self, "finding an archived task", self.inner.find_archived_task_by_key(key))
    }
    async fn list_tasks(&self, p: ListTasks) -> Result<Vec<TaskRecord>> {
        patiently!(self, "listing tasks", self.inner.list_tasks(p.clone()))
    }
    async fn summarize(&self) -> Result<Summary> {
        patiently!(self, "summarizing", self.inner.summarize())
    }
    async fn task_counts(&self) -> Result<Vec<(TaskState, u64)>> {
        patiently!(self, "counting tasks", self.inner.task_counts())
    }
    async fn heartbeat(&self, p: Heartbeat) -> Result<Vec<Member>> {
        patiently!(self, "a heartbeat", self.inner.heartbeat(p.clone()))
    }
    async fn sign_off(&self, instance: &InstanceId) -> Result<()> {
        patiently!(self, "signing off", self.inner.sign_off(instance))
    }
    fn subscribe_due_work(&self, wake: WakeFn) -> Subscription {
        self.inner.subscribe_due_work(wake)
    }
    fn concurrent_writes(&self) -> usize {
        self.inner.concurrent_writes()
    }
    fn hands_off_claims(&self) -> bool {
        self.inner.hands_off_claims()
    }
    async fn create_api_token(&self, p: NewApiToken) -> Result<ApiToken> {
        patiently!(self, "creating a token", self.inner.create_api_token(p.clone()))
    }
    async fn find_api_token(&self, secret_hash: &str) -> Result<Option<ApiToken>> {
        patiently!(self, "finding a token", self.inner.find_api_token(secret_hash))
    }
    async fn list_api_tokens(&self) -> Result<Vec<ApiToken>> {
        patiently!(self, "listing tokens", self.inner.list_api_tokens())
    }
    async fn revoke_api_token(&self, name: &str) -> Result<bool> {
        patiently!(self, "revoking a token", self.inner.revoke_api_token(name))
    }
    async fn task_events(&self, p: TaskEvents) -> Result<Vec<EventRecord>> {
        patiently!(self, "reading events", self.inner.task_events(p.clone()))
    }
    async fn queue_stats(&self) -> Result<QueueStats> {
        patiently!(self, "reading queue figures", self.inner.queue_stats())
    }
    async fn bulk_operate(&self, p: BulkOperate) -> Result<BulkReport> {
        patiently!(self, "a bulk action", self.inner.bulk_operate(p.clone()))
    }
    async fn record_workers_seen(&self, p: WorkersSeen) -> Result<()> {
        patiently!(self, "recording workers", self.inner.record_workers_seen(p.clone()))
    }
    async fn list_agent_workers(&self) -> Result<Vec<AgentWorker>> {
        patiently!(self, "listing workers", self.inner.list_agent_workers())
    }
    async fn replication(&self) -> Result<Option<Replication>> {
        patiently!(self, "reading the replication", self.inner.replication())
    }
    async fn read_cursor(&self, name: &str) -> Result<Option<i64>> {
        patiently!(self, "reading a cursor", self.inner.read_cursor(name))
    }
    async fn advance_cursor(&self, name: &str, to: i64) -> Result<()> {
        patiently!(self, "moving a cursor", self.inner.advance_cursor(name, to))
    }
    async fn put_documents(&self, kind: DocumentKind, docs: Vec<(String, serde_json::Value)>) -> Result<()> {
        patiently!(self, "keeping documents", self.inner.put_documents(kind, docs.clone()))
    }
    async fn list_documents(&self, kind: DocumentKind) -> Result<Vec<(String, serde_json::Value)>> {
        patiently!(self, "listing documents", self.inner.list_documents(kind))
    }
    async fn get_document(&self, kind: DocumentKind, name: &str) -> Result<Option<serde_json::Value>> {
        patiently!(self, "reading a document", self.inner.get_document(kind, name))
    }
    async fn delete_document(&self, kind: DocumentKind, name: &str) -> Result<bool> {
        patiently!(self, "forgetting a document", self.inner.delete_document(kind, name))
    }
    // Log lines written again after a lost answer appear twice: diagnostics, not state.
    async fn append_step_logs(&self, p: StepLogs) -> Result<()> {
        patiently!(self, "writing step logs", self.inner.append_step_logs(p.clone()))
    }
    async fn step_logs(&self, step: shiftboss_core::StepId) -> Result<Vec<EventRecord>> {
        patiently!(self, "reading step logs", self.inner.step_logs(step))
    }
    async fn count_events(&self, p: CountEvents) -> Result<EventCounts> {
        patiently!(self, "counting events", self.inner.count_events(p.clone()))
    }

    async fn stalled_tasks(&self, p: StalledTasks) -> Result<Vec<StalledTask>> {
        patiently!(self, "finding stalled tasks", self.inner.stalled_tasks(p.clone()))
    }
    async fn read_events(&self, p: ReadEvents) -> Result<EventsRead> {
        patiently!(self, "reading events", self.inner.read_events(p.clone()))
    }
    async fn create_subscription(&self, p: NewSubscription) -> Result<SubscriptionRecord> {
        patiently!(self, "creating a subscription", self.inner.create_subscription(p.clone()))
    }
    async fn list_subscriptions(&self) -> Result<Vec<SubscriptionRecord>> {
        patiently!(self, "listing subscriptions", self.inner.list_subscriptions())
    }
    async fn get_subscription(&self, id: i64) -> Result<Option<SubscriptionRecord>> {
        patiently!(self, "reading a subscription", self.inner.get_subscription(id))
    }
    async fn set_subscription_state(&self, p: SetSubscriptionState) -> Result<SubscriptionRecord> {
        patiently!(self, "changing a subscription", self.inner.set_subscription_state(p.clone()))
    }
    async fn delete_subscription(&self, id: i64) -> Result<bool> {
        patiently!(self, "deleting a subscription", self.inner.delete_subscription(id))
    }
    async fn claim_deliveries(&self, p: ClaimDeliveries) -> Result<ClaimedDeliveries> {
        patiently!(self, "claiming deliveries", self.inner.claim_deliveries(p.clone()))
    }
    async fn record_deliveries(&self, outcomes: Vec<DeliveryOutcome>) -> Result<Vec<bool>> {
        patiently!(self, "recording deliveries", self.inner.record_deliveries(outcomes.clone()))
    }
    async fn delivery_backlog(&self, cap: u32) -> Result<DeliveryBacklog> {
        patiently!(self, "counting the webhook backlog", self.inner.delivery_backlog(cap))
    }

    async fn list_deliveries(&self, q: DeliveryQuery) -> Result<Vec<DeliveryRecord>> {
        patiently!(self, "listing deliveries", self.inner.list_deliveries(q.clone()))
    }
    async fn get_delivery(&self, id: i64) -> Result<Option<DeliveryRecord>> {
        patiently!(self, "reading a delivery", self.inner.get_delivery(id))
    }
    async fn redeliver(&self, p: Redeliver) -> Result<RedeliverReport> {
        patiently!(self, "redelivering", self.inner.redeliver(p.clone()))
    }
    fn subscribe_deliveries(&self, wake: WakeFn) -> Subscription {
        self.inner.subscribe_deliveries(wake)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_ridden_out_and_a_refusal_is_not() {
        let w = Waiter::new(Duration::from_secs(30));
        let tries = AtomicU32::new(0);
        let got = w
            .retry("a test", || async {
                match tries.fetch_add(1, Ordering::Relaxed) {
                    0..3 => Err(StoreError::Unavailable("down".into())),
                    _ => Ok(7),
                }
            })
            .await;
        assert_eq!(got.unwrap(), 7);
        assert_eq!(tries.load(Ordering::Relaxed), 4);

        let tries = AtomicU32::new(0);
        let got: std::result::Result<(), _> = w
            .retry("a test", || async {
                tries.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::InvalidInput("no".into()))
            })
            .await;
        assert!(matches!(got, Err(StoreError::InvalidInput(_))));
        assert_eq!(tries.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_ends_at_the_bound() {
        let w = Waiter::new(Duration::from_secs(5));
        let started = tokio::time::Instant::now();
        let got: std::result::Result<(), _> =
            w.retry("a test", || async { Err(StoreError::Unavailable("down".into())) }).await;
        let e = got.unwrap_err();
        assert!(e.is_transient(), "{e}");
        assert!(e.to_string().contains("gave up after waiting 5s"), "{e}");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_secs(5) && waited < Duration::from_secs(6), "{waited:?}");
    }
}
