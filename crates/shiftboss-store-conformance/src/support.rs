//! What every case works with: a store on a manual clock, and short ways to drive it.
//!
//! Helpers panic with a message on any unexpected error: a case is a test, and a panic names the
//! step that went wrong.

use crate::Fixture;
use serde_json::{Value, json};
use shiftboss_core::model::{EventRecord, StepRecord};
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, StepId, TaskId, Timestamp};
use shiftboss_store::*;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Where every case's clock starts: a fixed, realistic time, so that failures print the same
/// numbers on every run.
pub const T0: Timestamp = Timestamp(1_700_000_000_000);

/// The agent of the standard test workflows.
pub const WORKER: &str = "worker";

/// Short forms of the store's verbs that only tests use: production reads the next due times each
/// verb returns with its work (`claim_due_work`, `sweep`, `reconcile_pass`), so the contract holds
/// those alone.
pub trait StoreTestExt: Store {
    /// The steps of `claim_due_work`, without its next due time.
    fn claim_due_steps(&self, p: ClaimDueSteps) -> impl Future<Output = Result<Vec<ClaimedStep>>> + Send {
        async move { Ok(self.claim_due_work(p).await?.steps) }
    }

    /// The report of `sweep`.
    fn expire_leases(&self, p: ExpireLeases) -> impl Future<Output = Result<ExpiryReport>> + Send {
        async move { Ok(self.sweep(p).await?.report) }
    }

    /// The report of `reconcile_pass`.
    fn reconcile(&self, p: Reconcile) -> impl Future<Output = Result<ReconcileReport>> + Send {
        async move { Ok(self.reconcile_pass(p).await?.report) }
    }
}

impl<S: Store + ?Sized> StoreTestExt for S {}

/// A store on a manual clock.
pub struct Harness<S> {
    pub clock: Arc<ManualClock>,
    pub store: S,
}

impl<S: Store> Harness<S> {
    /// Opens a handle on the fixture with a new manual clock at [`T0`].
    pub async fn open<F: Fixture<Store = S>>(fixture: &F) -> Self {
        let clock = ManualClock::new(T0);
        let store = fixture.open(Clock::Manual(clock.clone())).await;
        Harness { clock, store }
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// Registers a definition, which must be new or unchanged.
    pub async fn register(&self, def: &WorkflowDef) {
        self.store.register_workflow(def).await.unwrap_or_else(|e| panic!("register {}: {e}", def.name));
    }

    /// Registers the standard workflows: [`one_step`], [`three_steps`] and [`retrying`].
    pub async fn register_standard(&self) {
        for def in [one_step(), three_steps(), retrying()] {
            self.register(&def).await;
        }
    }

    pub async fn submit(&self, key: &str, workflow: &str, priority: i32) -> TaskId {
        let s = self.store.submit_task(submit_params(key, workflow, priority)).await;
        let s = s.unwrap_or_else(|e| panic!("submit {key}: {e}"));
        assert!(s.created, "task {key} was new");
        s.task_id
    }

    pub async fn claim(&self, instance: &str, agents: &[&str], limit: u32) -> Vec<ClaimedStep> {
        let p = claim_params(instance, agents, limit);
        self.store.claim_due_steps(p).await.unwrap_or_else(|e| panic!("claim for {instance}: {e}"))
    }

    /// Claims exactly one step of [`WORKER`].
    pub async fn claim_one(&self, instance: &str) -> ClaimedStep {
        let mut got = self.claim(instance, &[WORKER], 1).await;
        assert_eq!(got.len(), 1, "one step was due for {instance} at {}", self.now());
        got.remove(0)
    }

    pub async fn reply(
        &self,
        instance: &str,
        step: StepId,
        token: shiftboss_core::LeaseToken,
        result: ReplyResult,
    ) -> ReplyOutcome {
        let p = RecordReplies {
            instance: id(instance),
            replies: vec![Reply { step_id: step, lease_token: token, result }],
            policies: Default::default(),
        };
        let mut out = self.store.record_replies(p).await.unwrap_or_else(|e| panic!("reply for step {step}: {e}"));
        assert_eq!(out.len(), 1, "one outcome per reply");
        out.remove(0)
    }

    /// The holder of `c` replies that it finished with `output`.
    pub async fn complete(&self, instance: &str, c: &ClaimedStep, output: Value) -> ReplyOutcome {
        self.reply(instance, c.id, c.lease_token, ReplyResult::Completed(output)).await
    }

    pub async fn task(&self, id: TaskId) -> TaskDetail {
        self.store.get_task(id).await.expect("get_task").unwrap_or_else(|| panic!("task {id} exists"))
    }

    pub async fn step(&self, task: TaskId, step: StepId) -> StepRecord {
        let d = self.task(task).await;
        d.steps.into_iter().find(|s| s.id == step).unwrap_or_else(|| panic!("step {step} is in task {task}"))
    }

    /// Every task with its steps and events: equal snapshots mean nothing observable changed.
    pub async fn snapshot(&self) -> Vec<TaskDetail> {
        let all = self.store.list_tasks(ListTasks { limit: 100_000, ..Default::default() }).await.expect("list_tasks");
        let mut out = Vec::with_capacity(all.len());
        for t in all {
            out.push(self.task(t.id).await);
        }
        out
    }

    pub async fn elect(&self, name: &str, holder: &str, ttl: Duration) -> Option<LeaderTerm> {
        let p = ElectLeader { name: name.into(), holder: id(holder), ttl };
        self.store.elect_leader(p).await.unwrap_or_else(|e| panic!("elect {holder}: {e}"))
    }

    /// A supervisor term that outlives any case (one hour of manual time).
    pub async fn supervisor(&self) -> LeaderTerm {
        self.elect("supervisor", "supervisor-1", Duration::from_secs(3600)).await.expect("no one else holds it")
    }

    pub async fn expire(&self, leader: &LeaderTerm, policies: RetryPolicies) -> Result<ExpiryReport> {
        self.store
            .expire_leases(ExpireLeases { leader: leader.clone(), limit: 1000, policies: Arc::new(policies) })
            .await
    }

    pub async fn release(&self, instance: &str, policies: RetryPolicies) -> ExpiryReport {
        let p = ReleaseInstanceClaims { instance: id(instance), policies: Arc::new(policies) };
        self.store.release_instance_claims(p).await.unwrap_or_else(|e| panic!("release {instance}: {e}"))
    }
}

pub fn id(s: &str) -> InstanceId {
    InstanceId::new(s).expect("test instance ids are valid")
}

/// A claim by `instance` of up to `limit` steps of `agents`: every bucket, no domain, no limits.
pub fn claim_params(instance: &str, agents: &[&str], limit: u32) -> ClaimDueSteps {
    ClaimDueSteps {
        instance: id(instance),
        limit,
        agents: agents.iter().map(|a| a.to_string()).collect(),
        buckets: None,
        domains: vec![],
        limits: vec![],
    }
}

pub fn submit_params(key: &str, workflow: &str, priority: i32) -> SubmitTask {
    SubmitTask {
        correlation_id: None,
        domains: Default::default(),
        notify: None,
        key: key.into(),
        workflow: workflow.into(),
        version: None,
        input: json!({"order": key}),
        priority,
        actor: "app".into(),
    }
}

pub fn def(v: Value) -> WorkflowDef {
    WorkflowDef::from_json(&v.to_string()).expect("test definitions are valid")
}

/// One step of [`WORKER`] with a 1 s complete-by window and a config the agent must receive.
pub fn one_step() -> WorkflowDef {
    def(json!({"name": "one", "steps": [
        {"name": "work", "agent": WORKER, "timeout": "1s", "config": {"url": "http://svc/work"}}
    ]}))
}

/// Three steps in order, each 1 s.
pub fn three_steps() -> WorkflowDef {
    def(json!({"name": "three", "steps": [
        {"name": "reserve", "agent": WORKER, "timeout": "1s"},
        {"name": "charge", "agent": WORKER, "timeout": "1s"},
        {"name": "ship", "agent": WORKER, "timeout": "1s"}
    ]}))
}

/// One step whose own policy retries after 100 ms, 1 s, 10 s, then gives up.
pub fn retrying() -> WorkflowDef {
    def(json!({"name": "retrying", "steps": [
        {"name": "flaky", "agent": WORKER, "timeout": "1s",
         "retry": {"kind": "intervals", "intervals": ["100ms", "1s", "10s"]}}
    ]}))
}

pub fn count(events: &[EventRecord], kind: &str) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

/// The events of one kind about one step.
pub fn step_events<'a>(
    events: &'a [EventRecord],
    step: StepId,
    kind: &'a str,
) -> impl Iterator<Item = &'a EventRecord> {
    events.iter().filter(move |e| e.step_id == Some(step) && e.kind == kind)
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

impl<S: Store> Harness<S> {
    /// An operator's command by "ops", which must apply.
    pub async fn operate(&self, task: TaskId, command: TaskCommand) {
        let what = format!("{command:?}");
        self.try_operate(task, command).await.unwrap_or_else(|e| panic!("{what} on task {task}: {e}"));
    }

    pub async fn try_operate(&self, task: TaskId, command: TaskCommand) -> Result<()> {
        let p = OperateTask { task_id: task, actor: "ops".into(), reason: "test".into(), command };
        self.store.operate_task(p).await
    }

    /// Claims every due step of [`WORKER`] (up to 100) for `instance`, sorted by step name.
    pub async fn claim_all(&self, instance: &str) -> Vec<ClaimedStep> {
        let mut got = self.claim(instance, &[WORKER], 100).await;
        got.sort_by(|a, b| a.name.cmp(&b.name));
        got
    }

    /// The names of the claimed steps.
    pub fn names(claimed: &[ClaimedStep]) -> Vec<&str> {
        claimed.iter().map(|c| c.name.as_str()).collect()
    }

    /// The state of a task's step by instance name.
    pub async fn step_named(&self, task: TaskId, name: &str) -> StepRecord {
        let d = self.task(task).await;
        d.steps.into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("task {task} has a step {name}"))
    }

    pub async fn reconcile(&self, leader: &LeaderTerm, stale_after: Duration) -> Result<ReconcileReport> {
        self.store.reconcile(Reconcile { leader: leader.clone(), stale_after, limit: 1000 }).await
    }
}
