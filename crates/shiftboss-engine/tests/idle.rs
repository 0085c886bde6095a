//! Idle load (issue 6): an idle engine whose store can notify makes a handful of store calls, not
//! one per poll interval, and still starts a delayed retry on time (it sleeps until the next due
//! time its claim reported, not until its next poll).
//!
//! The store is SQLite behind a wrapper that counts every call and claims to have a due-work
//! channel (one that never rings), so the engine takes its long idle cadences: only the next
//! times the store reports can wake it.

use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_core::buckets::Member;
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskId, TaskState, Timestamp};
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig, Roles};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Counts the calls of each store operation, and says it can notify.
struct Counting {
    inner: SqliteStore,
    calls: Mutex<BTreeMap<&'static str, u32>>,
}

impl Counting {
    fn count(&self, op: &'static str) {
        *self.calls.lock().unwrap().entry(op).or_default() += 1;
    }

    fn calls(&self) -> BTreeMap<&'static str, u32> {
        self.calls.lock().unwrap().clone()
    }
}

/// The differences between two counts, for the operations that changed.
fn since(before: &BTreeMap<&'static str, u32>, after: &BTreeMap<&'static str, u32>) -> BTreeMap<&'static str, u32> {
    after.iter().map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0))).filter(|(_, v)| *v > 0).collect()
}

#[async_trait]
impl Store for Counting {
    async fn now(&self) -> Result<Timestamp> {
        self.count("now");
        self.inner.now().await
    }

    async fn register_workflow(&self, def: &WorkflowDef) -> Result<RegisterOutcome> {
        self.count("register_workflow");
        self.inner.register_workflow(def).await
    }

    async fn get_workflow(&self, name: &str, version: Option<u32>) -> Result<Option<WorkflowDef>> {
        self.count("get_workflow");
        self.inner.get_workflow(name, version).await
    }

    async fn submit_task(&self, p: SubmitTask) -> Result<Submitted> {
        self.count("submit_task");
        self.inner.submit_task(p).await
    }

    async fn submit_tasks_and_claim(
        &self,
        tasks: Vec<SubmitTask>,
        claims: Vec<ClaimDueSteps>,
    ) -> Result<SubmittedAndClaimed> {
        self.count("submit_tasks_and_claim");
        self.inner.submit_tasks_and_claim(tasks, claims).await
    }

    async fn submit_tasks(&self, tasks: Vec<SubmitTask>) -> Result<Vec<Submitted>> {
        self.count("submit_tasks");
        self.inner.submit_tasks(tasks).await
    }

    async fn claim_due_work(&self, p: ClaimDueSteps) -> Result<ClaimedWork> {
        self.count("claim_due_work");
        self.inner.claim_due_work(p).await
    }

    async fn record_replies(&self, p: RecordReplies) -> Result<Vec<ReplyOutcome>> {
        self.count("record_replies");
        self.inner.record_replies(p).await
    }

    async fn sweep(&self, p: ExpireLeases) -> Result<Swept> {
        self.count("sweep");
        self.inner.sweep(p).await
    }

    async fn release_instance_claims(&self, p: ReleaseInstanceClaims) -> Result<ExpiryReport> {
        self.count("release_instance_claims");
        self.inner.release_instance_claims(p).await
    }

    async fn elect_leader(&self, p: ElectLeader) -> Result<Option<LeaderTerm>> {
        self.count("elect_leader");
        self.inner.elect_leader(p).await
    }

    async fn resign_leader(&self, term: &LeaderTerm) -> Result<()> {
        self.count("resign_leader");
        self.inner.resign_leader(term).await
    }

    async fn resubmit_step(&self, p: ResubmitStep) -> Result<()> {
        self.count("resubmit_step");
        self.inner.resubmit_step(p).await
    }

    async fn cancel_task(&self, p: CancelTask) -> Result<()> {
        self.count("cancel_task");
        self.inner.cancel_task(p).await
    }

    async fn operate_task(&self, p: OperateTask) -> Result<()> {
        self.count("operate_task");
        self.inner.operate_task(p).await
    }

    async fn reconcile_pass(&self, p: Reconcile) -> Result<Reconciled> {
        self.count("reconcile_pass");
        self.inner.reconcile_pass(p).await
    }

    async fn extend_lease(&self, p: ExtendLease) -> Result<Timestamp> {
        self.count("extend_lease");
        self.inner.extend_lease(p).await
    }

    async fn enqueue_jobs(&self, p: EnqueueJobs) -> Result<Vec<Submitted>> {
        self.count("enqueue_jobs");
        self.inner.enqueue_jobs(p).await
    }

    async fn list_jobs(&self, q: JobQuery) -> Result<Vec<JobRecord>> {
        self.count("list_jobs");
        self.inner.list_jobs(q).await
    }

    async fn find_job(&self, job: JobRef) -> Result<Option<JobRecord>> {
        self.count("find_job");
        self.inner.find_job(job).await
    }

    async fn resubmit_jobs(&self, p: ResubmitJobs) -> Result<ResubmitReport> {
        self.count("resubmit_jobs");
        self.inner.resubmit_jobs(p).await
    }

    async fn archive(&self, p: Archive) -> Result<ArchiveReport> {
        self.count("archive");
        self.inner.archive(p).await
    }

    async fn archive_task(&self, p: ArchiveTask) -> Result<ArchiveReport> {
        self.count("archive_task");
        self.inner.archive_task(p).await
    }

    async fn list_workflows(&self) -> Result<Vec<WorkflowSummary>> {
        self.count("list_workflows");
        self.inner.list_workflows().await
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<TaskDetail>> {
        self.count("get_task");
        self.inner.get_task(id).await
    }

    async fn find_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>> {
        self.count("find_task_by_key");
        self.inner.find_task_by_key(key).await
    }

    async fn get_archived_task(&self, id: TaskId) -> Result<Option<TaskDetail>> {
        self.count("get_archived_task");
        self.inner.get_archived_task(id).await
    }

    async fn get_task_head(&self, id: TaskId, archived: bool, events: u32) -> Result<Option<TaskDetail>> {
        self.count("get_task_head");
        self.inner.get_task_head(id, archived, events).await
    }

    async fn find_archived_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>> {
        self.count("find_archived_task_by_key");
        self.inner.find_archived_task_by_key(key).await
    }

    async fn list_tasks(&self, p: ListTasks) -> Result<Vec<TaskRecord>> {
        self.count("list_tasks");
        self.inner.list_tasks(p).await
    }

    async fn summarize(&self) -> Result<Summary> {
        self.count("summarize");
        self.inner.summarize().await
    }

    async fn task_counts(&self) -> Result<Vec<(TaskState, u64)>> {
        self.count("task_counts");
        self.inner.task_counts().await
    }

    async fn heartbeat(&self, p: Heartbeat) -> Result<Vec<Member>> {
        self.count("heartbeat");
        self.inner.heartbeat(p).await
    }

    async fn sign_off(&self, instance: &InstanceId) -> Result<()> {
        self.count("sign_off");
        self.inner.sign_off(instance).await
    }

    /// A channel that never rings: the engine believes lost notifications are its only risk.
    fn subscribe_due_work(&self, _wake: WakeFn) -> Subscription {
        Subscription::new(())
    }

    async fn create_api_token(&self, p: NewApiToken) -> Result<ApiToken> {
        self.count("create_api_token");
        self.inner.create_api_token(p).await
    }

    async fn find_api_token(&self, secret_hash: &str) -> Result<Option<ApiToken>> {
        self.count("find_api_token");
        self.inner.find_api_token(secret_hash).await
    }

    async fn list_api_tokens(&self) -> Result<Vec<ApiToken>> {
        self.count("list_api_tokens");
        self.inner.list_api_tokens().await
    }

    async fn revoke_api_token(&self, name: &str) -> Result<bool> {
        self.count("revoke_api_token");
        self.inner.revoke_api_token(name).await
    }

    async fn task_events(&self, p: TaskEvents) -> Result<Vec<EventRecord>> {
        self.count("task_events");
        self.inner.task_events(p).await
    }

    async fn queue_stats(&self) -> Result<shiftboss_store::QueueStats> {
        self.count("queue_stats");
        self.inner.queue_stats().await
    }

    async fn bulk_operate(&self, p: BulkOperate) -> Result<BulkReport> {
        self.count("bulk_operate");
        self.inner.bulk_operate(p).await
    }

    async fn record_workers_seen(&self, p: WorkersSeen) -> Result<()> {
        self.count("record_workers_seen");
        self.inner.record_workers_seen(p).await
    }

    async fn list_agent_workers(&self) -> Result<Vec<AgentWorker>> {
        self.count("list_agent_workers");
        self.inner.list_agent_workers().await
    }

    async fn read_cursor(&self, name: &str) -> Result<Option<i64>> {
        self.count("read_cursor");
        self.inner.read_cursor(name).await
    }

    async fn advance_cursor(&self, name: &str, to: i64) -> Result<()> {
        self.count("advance_cursor");
        self.inner.advance_cursor(name, to).await
    }

    async fn put_documents(&self, kind: DocumentKind, docs: Vec<(String, serde_json::Value)>) -> Result<()> {
        self.count("put_documents");
        self.inner.put_documents(kind, docs).await
    }

    async fn list_documents(&self, kind: DocumentKind) -> Result<Vec<(String, serde_json::Value)>> {
        self.count("list_documents");
        self.inner.list_documents(kind).await
    }

    async fn get_document(&self, kind: DocumentKind, name: &str) -> Result<Option<serde_json::Value>> {
        self.count("get_document");
        self.inner.get_document(kind, name).await
    }

    async fn delete_document(&self, kind: DocumentKind, name: &str) -> Result<bool> {
        self.count("delete_document");
        self.inner.delete_document(kind, name).await
    }

    async fn append_step_logs(&self, p: StepLogs) -> Result<()> {
        self.count("append_step_logs");
        self.inner.append_step_logs(p).await
    }

    async fn step_logs(&self, step: shiftboss_core::StepId) -> Result<Vec<EventRecord>> {
        self.count("step_logs");
        self.inner.step_logs(step).await
    }

    async fn count_events(&self, p: CountEvents) -> Result<EventCounts> {
        self.count("count_events");
        self.inner.count_events(p).await
    }

    async fn stalled_tasks(&self, p: StalledTasks) -> Result<Vec<StalledTask>> {
        self.count("stalled_tasks");
        self.inner.stalled_tasks(p).await
    }

    async fn create_subscription(&self, p: NewSubscription) -> Result<SubscriptionRecord> {
        self.count("create_subscription");
        self.inner.create_subscription(p).await
    }

    async fn list_subscriptions(&self) -> Result<Vec<SubscriptionRecord>> {
        self.count("list_subscriptions");
        self.inner.list_subscriptions().await
    }

    async fn get_subscription(&self, id: i64) -> Result<Option<SubscriptionRecord>> {
        self.count("get_subscription");
        self.inner.get_subscription(id).await
    }

    async fn set_subscription_state(&self, p: SetSubscriptionState) -> Result<SubscriptionRecord> {
        self.count("set_subscription_state");
        self.inner.set_subscription_state(p).await
    }

    async fn delete_subscription(&self, id: i64) -> Result<bool> {
        self.count("delete_subscription");
        self.inner.delete_subscription(id).await
    }

    async fn claim_deliveries(&self, p: ClaimDeliveries) -> Result<ClaimedDeliveries> {
        self.count("claim_deliveries");
        self.inner.claim_deliveries(p).await
    }

    async fn record_deliveries(&self, outcomes: Vec<DeliveryOutcome>) -> Result<Vec<bool>> {
        self.count("record_deliveries");
        self.inner.record_deliveries(outcomes).await
    }

    async fn delivery_backlog(&self, cap: u32) -> Result<DeliveryBacklog> {
        self.count("delivery_backlog");
        self.inner.delivery_backlog(cap).await
    }

    async fn list_deliveries(&self, q: DeliveryQuery) -> Result<Vec<DeliveryRecord>> {
        self.count("list_deliveries");
        self.inner.list_deliveries(q).await
    }

    async fn get_delivery(&self, id: i64) -> Result<Option<DeliveryRecord>> {
        self.count("get_delivery");
        self.inner.get_delivery(id).await
    }

    async fn redeliver(&self, p: Redeliver) -> Result<RedeliverReport> {
        self.count("redeliver");
        self.inner.redeliver(p).await
    }

    fn subscribe_deliveries(&self, wake: WakeFn) -> Subscription {
        self.inner.subscribe_deliveries(wake)
    }

    async fn read_events(&self, p: ReadEvents) -> Result<EventsRead> {
        self.count("read_events");
        self.inner.read_events(p).await
    }
}

/// Fails its first call, then succeeds; records when each call started.
struct FailsOnce {
    starts: Arc<Mutex<Vec<Instant>>>,
}

#[async_trait]
impl Agent for FailsOnce {
    async fn call(&self, _call: &AgentCall) -> Result<Value, AgentError> {
        let mut starts = self.starts.lock().unwrap();
        starts.push(Instant::now());
        if starts.len() == 1 { Err(AgentError::Failure("not yet".into())) } else { Ok(json!({})) }
    }
}

/// Short bounds everywhere (the old fixed ticks would make dozens of calls a second), long idle
/// cadences: only what the store reports can wake the roles on time.
fn config() -> EngineConfig {
    let mut c = EngineConfig { roles: Roles::default(), ..EngineConfig::default() };
    c.scheduler.poll_interval = Duration::from_millis(50);
    c.scheduler.idle_poll = Duration::from_secs(30);
    c.supervisor.interval = Duration::from_millis(100);
    c.supervisor.reconcile_interval = Duration::from_millis(100);
    c.supervisor.idle_interval = Duration::from_secs(30);
    c.alerts.poll = Duration::from_secs(30);
    c.alerts.idle_poll = Duration::from_secs(30);
    c.supervisor.leader_ttl = Duration::from_secs(90);
    c.supervisor.archive.interval = Duration::from_secs(30);
    c
}

const RETRY_AFTER: Duration = Duration::from_millis(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_engine_makes_few_store_calls_and_starts_a_delayed_retry_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting {
        inner: SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap(),
        calls: Mutex::default(),
    });
    let starts = Arc::new(Mutex::new(Vec::new()));
    let engine = Engine::builder(store.clone(), InstanceId::new("idle-1").unwrap())
        .agent("flaky", FailsOnce { starts: starts.clone() })
        .agent_retry("flaky", RetryPolicy::Intervals { intervals: vec![RETRY_AFTER], max_failures: None })
        .config(config())
        .build()
        .unwrap();
    let def = r#"{"name":"w","steps":[{"name":"a","agent":"flaky","timeout":"5s"}]}"#;
    engine.register_workflow(&WorkflowDef::from_json(def).unwrap()).await.unwrap();
    let running = engine.start();

    let task = engine
        .submit(SubmitTask {
            correlation_id: None,
            domains: Default::default(),
            notify: None,
            key: "t".into(),
            workflow: "w".into(),
            version: None,
            input: json!({}),
            priority: 0,
            actor: "test".into(),
        })
        .await
        .unwrap()
        .task_id;
    let give_up = Instant::now() + Duration::from_secs(20);
    while !store.inner.get_task(task).await.unwrap().unwrap().task.state.is_terminal() {
        assert!(Instant::now() < give_up, "the task never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 2, "one failure, one retry");
    let gap = starts[1] - starts[0];
    // The retry is due RETRY_AFTER after the failure was recorded, which is after the first start;
    // the idle poll (30 s) cannot be what started it.
    assert!(gap >= RETRY_AFTER - Duration::from_millis(1), "the retry started early: {gap:?}");
    assert!(gap < RETRY_AFTER + Duration::from_millis(400), "the retry started late: {gap:?}");

    // Idle now: the stale complete-by of the finished step (5 s away) is the nearest thing the
    // supervisor knows of, every other cadence is 30 s; the old ticks would make about 60 calls.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = store.calls();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = since(&before, &store.calls());
    let total: u32 = idle.values().sum();
    assert!(total <= 2, "an idle engine made {total} store calls in 3 s: {idle:?}");
    running.shutdown().await;
}
