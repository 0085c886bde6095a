//! The engine end to end on a SQLite file, against real HTTP services on loopback that misbehave.

mod support;

use serde_json::json;
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, StepState, TaskId, TaskState};
use shiftboss_engine::{Engine, EngineConfig, HttpAgent, Roles};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{ClaimDueSteps, ResubmitStep, Store, SubmitTask, TaskDetail, event_kind as ev};
use std::sync::Arc;
use std::time::Duration;
use support::{Behavior, Service};

fn fast_config(roles: Roles) -> EngineConfig {
    let mut c = EngineConfig { roles, ..EngineConfig::default() };
    c.scheduler.poll_interval = Duration::from_millis(20);
    c.scheduler.backoff.base = Duration::from_millis(1);
    c.scheduler.backoff.cap = Duration::from_millis(10);
    c.supervisor.interval = Duration::from_millis(50);
    c.supervisor.leader_ttl = Duration::from_secs(2);
    c
}

fn quick_retries() -> RetryPolicy {
    RetryPolicy::Intervals { intervals: vec![Duration::from_millis(10); 5], max_failures: None }
}

fn workflow(timeout_ms: u64) -> WorkflowDef {
    WorkflowDef::from_json(&format!(
        r#"{{"name":"order","steps":[
            {{"name":"reserve","agent":"svc","config":{{"url":"/reserve"}},"timeout":{timeout_ms}}},
            {{"name":"charge","agent":"svc","config":{{"url":"/charge"}},"timeout":{timeout_ms}}},
            {{"name":"ship","agent":"svc","config":{{"url":"/ship"}},"timeout":{timeout_ms}}}]}}"#
    ))
    .unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        Fixture { _dir: dir, path }
    }

    fn store(&self) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(&self.path, &OpenOptions::default()).unwrap())
    }

    fn engine(&self, svc: &Service, instance: &str, roles: Roles) -> Engine {
        Engine::builder(self.store(), InstanceId::new(instance).unwrap())
            .agent("svc", HttpAgent::for_service(&svc.base, support::loopback()).unwrap())
            .default_retry(quick_retries())
            .config(fast_config(roles))
            .build()
            .unwrap()
    }
}

fn order(key: &str) -> SubmitTask {
    SubmitTask {
        domains: Default::default(),
        correlation_id: None,
        notify: None,
        key: key.into(),
        workflow: "order".into(),
        version: None,
        input: json!({"order_id": key}),
        priority: 0,
        actor: "test".into(),
    }
}

/// Waits until the task reaches a terminal state; a bounded wait on the store, not a fixed sleep.
async fn wait_terminal(store: &Arc<dyn Store>, id: TaskId) -> TaskDetail {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let d = store.get_task(id).await.unwrap().unwrap();
        if d.task.state.is_terminal() {
            return d;
        }
        assert!(tokio::time::Instant::now() < give_up, "task {id} still {:?}: {:#?}", d.task.state, d.steps);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn count(d: &TaskDetail, kind: &str) -> usize {
    d.events.iter().filter(|e| e.kind == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_faults_are_retried_with_one_idempotency_key_per_step() {
    let svc = Service::start(vec![Behavior::Status(503), Behavior::Status(429), Behavior::Status(500)]).await;
    let fx = Fixture::new();
    let engine = fx.engine(&svc, "s1", Roles::default());
    engine.register_workflow(&workflow(5_000)).await.unwrap();
    let running = engine.start();
    let id = engine.submit(order("o-1")).await.unwrap().task_id;
    let d = wait_terminal(engine.store(), id).await;
    running.shutdown().await;

    assert_eq!(d.task.state, TaskState::Completed);
    assert_eq!(d.task.output.as_ref().unwrap()["ok"], json!(true));
    let log = svc.log.lock().unwrap();
    assert_eq!(log.keys.len(), 6, "3 faults + 3 successes");
    // The first three requests were tries at the first step: one key.
    assert!(log.keys[..4].iter().all(|k| *k == log.keys[0]));
    let distinct: std::collections::HashSet<_> = log.keys.iter().collect();
    assert_eq!(distinct.len(), 3, "one key per step");
    assert!(d.steps.iter().all(|s| s.attempts == 1), "retried within the claim, not by the supervisor");
    assert_eq!(engine.metrics().in_call_retries, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_submitted_through_the_engine_runs_every_task() {
    let svc = Service::start(Vec::new()).await;
    let fx = Fixture::new();
    let engine = fx.engine(&svc, "s1", Roles::default());
    engine.register_workflow(&workflow(5_000)).await.unwrap();
    let running = engine.start();
    let got = engine.submit_many(vec![order("b-1"), order("b-2"), order("b-1")]).await.unwrap();
    assert!(got[0].created && got[1].created && !got[2].created);
    assert_eq!(got[2].task_id, got[0].task_id);
    for s in &got[..2] {
        let d = wait_terminal(engine.store(), s.task_id).await;
        assert_eq!(d.task.state, TaskState::Completed, "{}", d.task.key);
    }
    running.shutdown().await;
    assert_eq!(svc.log.lock().unwrap().keys.len(), 6, "three calls per order, once each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_error_fails_the_step_with_an_alert_and_resubmit_finishes_it() {
    let svc = Service::start(vec![Behavior::Ok, Behavior::Status(422)]).await;
    let fx = Fixture::new();
    let engine = fx.engine(&svc, "s1", Roles::default());
    engine.register_workflow(&workflow(5_000)).await.unwrap();
    let running = engine.start();
    let id = engine.submit(order("o-1")).await.unwrap().task_id;
    let d = wait_terminal(engine.store(), id).await;

    assert_eq!(d.task.state, TaskState::Failed);
    let charge = d.steps.iter().find(|s| s.name == "charge").unwrap();
    assert_eq!(charge.state, StepState::Error);
    assert!(charge.last_error.as_deref().unwrap().contains("422"));
    assert_eq!(charge.attempts, 1, "a permanent error is not retried");
    let alerts: Vec<_> = d.events.iter().filter(|e| e.level == shiftboss_core::model::EventLevel::Alert).collect();
    assert!(alerts.iter().any(|e| e.kind == ev::STEP_ERROR && e.step_id == Some(charge.id)));
    assert!(alerts.iter().any(|e| e.kind == ev::TASK_FAILED));

    // The operator fixes the cause (the script now answers 200) and resubmits.
    engine
        .store()
        .resubmit_step(ResubmitStep { step_id: charge.id, actor: "ops".into(), reason: "card updated".into() })
        .await
        .unwrap();
    engine.wake();
    let d = wait_terminal(engine.store(), id).await;
    running.shutdown().await;
    assert_eq!(d.task.state, TaskState::Completed);
    assert_eq!(count(&d, ev::STEP_RESUBMITTED), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_is_dropped_and_the_supervisor_has_it_retried() {
    // The first call applies its effect and never answers in time: a lost reply.
    let svc = Service::start(vec![Behavior::ApplyThenHang(Duration::from_secs(30))]).await;
    let fx = Fixture::new();
    let engine = fx.engine(&svc, "s1", Roles::default());
    engine.register_workflow(&workflow(300)).await.unwrap();
    let running = engine.start();
    let id = engine.submit(order("o-1")).await.unwrap().task_id;
    let d = wait_terminal(engine.store(), id).await;
    running.shutdown().await;

    assert_eq!(d.task.state, TaskState::Completed);
    let reserve = &d.steps[0];
    assert_eq!(reserve.failure_count, 1, "one expiry, counted once");
    assert_eq!(reserve.attempts, 2);
    assert_eq!(count(&d, ev::STEP_EXPIRED), 1);
    let log = svc.log.lock().unwrap();
    assert_eq!(log.keys[0], log.keys[1], "the retry carried the same idempotency key");
    assert!(engine.metrics().dropped_at_deadline >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_scheduler_takes_back_its_steps_at_once() {
    let svc = Service::start(vec![]).await;
    let fx = Fixture::new();
    let store = fx.store();
    // A scheduler "sched-a" claimed the first step and died: the step is Processing under its
    // name with a complete-by an hour away.
    let mut wf = workflow(3_600_000);
    wf.name = "order".into();
    let engine = fx.engine(&svc, "sched-a", Roles { scheduler: true, supervisor: false, dispatcher: false });
    engine.register_workflow(&wf).await.unwrap();
    let id = store.submit_task(order("o-1")).await.unwrap().task_id;
    let claimed = store
        .claim_due_work(ClaimDueSteps {
            instance: InstanceId::new("sched-a").unwrap(),
            limit: 10,
            agents: vec!["svc".into()],
            buckets: None,
            domains: vec![],
            limits: vec![],
        })
        .await
        .unwrap()
        .steps;
    assert_eq!(claimed.len(), 1);

    // Restarted under the same instance id, without any supervisor, it finishes the task.
    let running = engine.start();
    let d = wait_terminal(&store, id).await;
    running.shutdown().await;
    assert_eq!(d.task.state, TaskState::Completed);
    assert_eq!(count(&d, ev::STEP_RELEASED), 1);
    assert_eq!(d.steps[0].attempts, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_on_one_file_never_hold_the_same_step() {
    let svc = Service::start(vec![]).await;
    let fx = Fixture::new();
    let a = fx.engine(&svc, "sched-a", Roles::default());
    let b = fx.engine(&svc, "sched-b", Roles::default());
    a.register_workflow(&workflow(5_000)).await.unwrap();
    let (ra, rb) = (a.start(), b.start());
    let mut ids = Vec::new();
    for i in 0..60 {
        let e = if i % 2 == 0 { &a } else { &b };
        ids.push(e.submit(order(&format!("o-{i}"))).await.unwrap().task_id);
    }
    for id in &ids {
        assert_eq!(wait_terminal(a.store(), *id).await.task.state, TaskState::Completed);
    }
    ra.shutdown().await;
    rb.shutdown().await;
    let log = svc.log.lock().unwrap();
    assert!(!log.overlapped, "two requests for one step were in flight at once");
    assert_eq!(log.keys.len(), 180, "every step ran exactly once");
    assert!(log.applied.values().all(|n| *n == 1));
    let (ma, mb) = (a.metrics(), b.metrics());
    assert_eq!(ma.claimed + mb.claimed, 180);
    assert!(ma.claimed > 0 && mb.claimed > 0, "both schedulers took work: {ma:?} {mb:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_agent_or_a_bad_agent_config_is_refused_at_registration() {
    let svc = Service::start(vec![]).await;
    let fx = Fixture::new();
    let engine = fx.engine(&svc, "s1", Roles::default());
    let mut wf = workflow(1000);
    wf.steps[1].agent = Some("nobody".into());
    let err = engine.register_workflow(&wf).await.unwrap_err().to_string();
    assert!(err.contains("charge") && err.contains("unknown agent"), "{err}");
    let mut wf = workflow(1000);
    wf.steps[2].config = json!({"url": "/ship", "method": "NOT A METHOD"});
    let err = engine.register_workflow(&wf).await.unwrap_err().to_string();
    assert!(err.contains("ship") && err.contains("method"), "{err}");
    assert!(engine.store().get_workflow("order", None).await.unwrap().is_none(), "nothing registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_claims_only_the_agent_types_it_serves() {
    let svc = Service::start(vec![]).await;
    let fx = Fixture::new();
    let mut config = fast_config(Roles { scheduler: true, supervisor: false, dispatcher: false });
    config.scheduler.agents = Some(vec!["svc".into()]);
    let engine = Engine::builder(fx.store(), InstanceId::new("s1").unwrap())
        .agent("svc", HttpAgent::for_service(&svc.base, support::loopback()).unwrap())
        .agent("other", HttpAgent::for_service(&svc.base, support::loopback()).unwrap())
        .config(config)
        .build()
        .unwrap();
    engine.register_workflow(&workflow(5_000)).await.unwrap();
    let mut other = workflow(5_000);
    other.name = "other".into();
    other.steps.iter_mut().for_each(|s| s.agent = Some("other".into()));
    engine.register_workflow(&other).await.unwrap();
    let running = engine.start();
    // Submitted first, so it is due first: a scheduler that served it would claim it first.
    let mut o = order("other-1");
    o.workflow = "other".into();
    let skipped = engine.submit(o).await.unwrap().task_id;
    let served = engine.submit(order("o-1")).await.unwrap().task_id;
    assert_eq!(wait_terminal(engine.store(), served).await.task.state, TaskState::Completed);
    running.shutdown().await;
    let d = engine.store().get_task(skipped).await.unwrap().unwrap();
    assert_eq!((d.steps[0].state, d.steps[0].attempts), (StepState::Pending, 0));

    // Serving an agent the engine does not have is a configuration error.
    let mut config = fast_config(Roles::default());
    config.scheduler.agents = Some(vec!["nobody".into()]);
    let built = Engine::builder(fx.store(), InstanceId::new("s2").unwrap())
        .agent("svc", HttpAgent::for_service(&svc.base, support::loopback()).unwrap())
        .config(config)
        .build();
    assert!(matches!(built, Err(shiftboss_engine::EngineError::Config(m)) if m.contains("nobody")));
}

/// An export whose job runs at a service: the first attempt starts it, says so in its progress and
/// hands the step back (not ready yet); the next attempt, after the delay, finds the job id in the
/// progress it is handed and finishes. No failure is counted.
struct Export;

#[async_trait::async_trait]
impl shiftboss_engine::Agent for Export {
    async fn call(
        &self,
        call: &shiftboss_engine::AgentCall,
    ) -> Result<serde_json::Value, shiftboss_engine::AgentError> {
        match &call.previous_progress {
            None => {
                call.progress
                    .report_with(json!({"job": "J-1"}))
                    .await
                    .map_err(|e| shiftboss_engine::AgentError::Transient(e.to_string()))?;
                Err(shiftboss_engine::AgentError::Postpone(Duration::from_millis(200)))
            }
            Some(p) => Ok(json!({"resumed": p["job"], "attempt": call.attempt})),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_postpones_and_its_next_attempt_goes_on_from_its_progress() {
    let fx = Fixture::new();
    let engine = Engine::builder(fx.store(), InstanceId::new("s1").unwrap())
        .agent("export", Export)
        .default_retry(quick_retries())
        .config(fast_config(Roles::default()))
        .build()
        .unwrap();
    let def = WorkflowDef::from_json(r#"{"name":"export","steps":[{"name":"run","agent":"export","timeout":5000}]}"#)
        .unwrap();
    engine.register_workflow(&def).await.unwrap();
    let running = engine.start();
    let mut o = order("e-1");
    o.workflow = "export".into();
    let submitted = std::time::Instant::now();
    let id = engine.submit(o).await.unwrap().task_id;
    let d = wait_terminal(engine.store(), id).await;
    running.shutdown().await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output, Some(json!({"resumed": "J-1", "attempt": 2})));
    assert!(submitted.elapsed() >= Duration::from_millis(200), "ran again before its delay ended");
    assert_eq!((d.steps[0].attempts, d.steps[0].failure_count), (2, 0));
    assert_eq!(count(&d, ev::STEP_POSTPONED), 1);
    assert_eq!(engine.metrics().postponed, 1);
}
