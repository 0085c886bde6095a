//! The scheduler's slot limit with the default settings (issue 22): it grows past its floor while
//! a backlog of steps keeps their pace, and it stays low against a real HTTP service on loopback
//! that serves a fixed number of requests a second, so that more at once only makes each slower.

use async_trait::async_trait;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskState};
use shiftboss_engine::{Agent, AgentCall, AgentError, Engine, EngineConfig, HttpAgent};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Counts the calls in flight and the most there ever were.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl InFlight {
    fn enter(&self) -> usize {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
        n
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

/// An in-process agent whose every call takes 20 ms, however many run at once.
struct Steady(Arc<InFlight>);

#[async_trait]
impl Agent for Steady {
    async fn call(&self, _call: &AgentCall) -> Result<Value, AgentError> {
        self.0.enter();
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.0.leave();
        Ok(json!({}))
    }
}

/// A service that does 500 requests a second, whatever comes in: each request waits 2 ms for every
/// request in flight (its own included), as a request queued behind the others would.
async fn saturated_service(counter: Arc<InFlight>) -> String {
    async fn handle(State(c): State<Arc<InFlight>>) -> String {
        let n = c.enter();
        tokio::time::sleep(Duration::from_millis(2 * n as u64)).await;
        c.leave();
        json!({"ok": true}).to_string()
    }
    let app = Router::new().route("/{*path}", post(handle)).with_state(counter);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(dir.path().join("state.db"), &OpenOptions::default()).unwrap())
}

fn one_step(agent: &str) -> WorkflowDef {
    WorkflowDef::from_json(&format!(
        r#"{{"name":"one","steps":[{{"name":"call","agent":"{agent}","config":{{"url":"/call"}},"timeout":30000}}]}}"#
    ))
    .unwrap()
}

fn tasks(n: usize) -> Vec<SubmitTask> {
    (0..n)
        .map(|i| SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: format!("t-{i}"),
            workflow: "one".into(),
            version: None,
            input: json!({}),
            priority: 0,
            actor: "test".into(),
        })
        .collect()
}

/// Waits (bounded) until every task has ended; all must have completed.
async fn drained(store: &dyn Store, n: u64) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let counts = store.task_counts().await.unwrap();
        let ended: u64 = counts.iter().filter(|(s, _)| s.is_terminal()).map(|(_, n)| n).sum();
        if ended == n {
            let completed = counts.iter().find(|(s, _)| *s == TaskState::Completed).map_or(0, |(_, n)| *n);
            assert_eq!(completed, n, "every task completes: {counts:?}");
            return;
        }
        assert!(tokio::time::Instant::now() < give_up, "not drained in time: {counts:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_that_keeps_its_pace_grows_the_limit_past_its_floor() {
    let config = EngineConfig::default();
    assert_eq!((config.scheduler.min_concurrency, config.scheduler.concurrency), (64, 2048));
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let counter = Arc::new(InFlight::default());
    let engine = Engine::builder(store.clone(), InstanceId::new("grows").unwrap())
        .agent("steady", Steady(counter.clone()))
        .config(config)
        .build()
        .unwrap();
    engine.register_workflow(&one_step("steady")).await.unwrap();
    engine.submit_many(tasks(6000)).await.unwrap();
    let running = engine.start();
    // The metrics follow the limit: sampled while the backlog drains (it falls back once idle).
    let sampler = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let mut most = 0;
            loop {
                most = most.max(engine.metrics().slot_limit);
                if most > 64 {
                    return most;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    drained(store.as_ref(), 6000).await;
    let shown =
        tokio::time::timeout(Duration::from_secs(5), sampler).await.expect("the metrics showed a grown limit").unwrap();
    assert!(shown <= 2048, "the metrics show a limit past the ceiling: {shown}");
    running.shutdown().await;
    // A fixed limit at the floor would never pass 64.
    let most = counter.most();
    assert!(most > 512, "the limit grew with the backlog: at most {most} calls at once");
    assert!(most <= 2048, "never past the ceiling: {most}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_slows_under_load_holds_the_limit_down() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let counter = Arc::new(InFlight::default());
    let base = saturated_service(counter.clone()).await;
    let outbound = shiftboss_engine::Outbound::new(&shiftboss_engine::OutboundConfig::allowing_loopback()).unwrap();
    let engine = Engine::builder(store.clone(), InstanceId::new("holds").unwrap())
        .agent("svc", HttpAgent::for_service(&base, outbound).unwrap())
        .config(EngineConfig::default())
        .build()
        .unwrap();
    engine.register_workflow(&one_step("svc")).await.unwrap();
    engine.submit_many(tasks(2000)).await.unwrap();
    let running = engine.start();
    drained(store.as_ref(), 2000).await;
    running.shutdown().await;
    // The limit doubles from 64 while the calls keep their time (2 ms a request in flight: 128 ms
    // at 64, 256 ms at 128) and falls back once they take more than twice as long (512 ms at
    // 256), so it swings between about 100 and 256 (calls on their way to the service and back count in
    // the limit, not at the service); the ceiling (2,048) would put every task's
    // call in flight at once, each taking seconds.
    let most = counter.most();
    assert!(most > 96, "it did grow from the floor while the calls kept their time: {most}");
    assert!(most <= 400, "it held the service's load down: at most {most} calls at once");
}
