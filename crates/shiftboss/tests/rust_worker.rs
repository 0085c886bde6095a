//! The Rust worker client (`shiftboss-worker`) against a real `shiftboss serve` process over
//! loopback, on SQLite and on PostgreSQL: tasks finished with outputs, transient failures retried
//! and permanent ones failing the task, never more steps held than its concurrency, heartbeats
//! that keep a long step past its first complete-by and carry its progress (with no response window too), a shutdown that finishes what it holds
//! (and what a poll answering at that moment brings),
//! a restarted worker that takes back at once what it held when it died, and a bad token that
//! stops the worker with the server's refusal.

#[macro_use]
mod common;

use async_trait::async_trait;
use common::api::{AGENT, Api};
use common::{Serve, ServeProc};
use serde_json::{Value, json};
use shiftboss_worker::{ClientError, Failure, Handler, Step, Worker, WorkerConfig};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

async fn started(db: &str, logs: &Path) -> (ServeProc, Api) {
    let mut p = Serve::new(db, "rust-worker-1").api().arg("--remote-agent").arg(AGENT).spawn(logs);
    p.wait_ready().await;
    let api = Api::of(&p);
    (p, api)
}

fn config(api: &Api, id: &str, concurrency: usize) -> WorkerConfig {
    let mut c = WorkerConfig::new(api.base.clone(), api.token.clone(), id, [AGENT]);
    c.concurrency = concurrency;
    c.poll_wait = Duration::from_secs(2);
    c
}

/// What the stand-in handler does, chosen by the task's input.
#[derive(Default)]
struct Parcels {
    /// Steps running now, and the most ever at once.
    now: AtomicUsize,
    most: AtomicUsize,
    /// Rung when a step starts.
    started: Notify,
}

#[async_trait]
impl Handler for Parcels {
    async fn run(&self, step: &Step) -> Result<Value, Failure> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.started.notify_waiters();
        if let Some(stage) = step.input.get("stage") {
            step.report_progress(json!({"parcel": step.input["n"], "stage": stage}));
        }
        let mut hold = Duration::from_millis(step.input["hold_ms"].as_u64().unwrap_or(0));
        if step.input["hold_first_only"] == true && step.attempt > 1 {
            hold = Duration::ZERO;
        }
        tokio::time::sleep(hold).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        match step.input["then"].as_str() {
            Some("flaky") if step.attempt == 1 => Err(Failure::Transient("the carrier is busy".into())),
            Some("broken") => Err(Failure::Permanent("no such address".into())),
            Some("later") if step.attempt == 1 => Err(Failure::Postpone(Duration::from_millis(300))),
            _ => Ok(json!({"parcel": step.input["n"], "attempt": step.attempt, "key": step.task_key})),
        }
    }
}

fn spawn(
    worker: Worker,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<Result<shiftboss_worker::WorkerStats, ClientError>>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    (stop, run)
}

async fn finishes_tasks_within_its_concurrency(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("30s", None).await;
    let parcels = Arc::new(Parcels::default());
    let (stop, run) = spawn(Worker::new(config(&api, "rs-1", 3), parcels.clone()).unwrap());
    let mut ids = Vec::new();
    for n in 0..10 {
        ids.push(api.submit(&format!("p-{n}"), json!({"n": n, "hold_ms": 100}), 0).await);
    }
    let flaky = api.submit("p-flaky", json!({"n": 10, "then": "flaky"}), 0).await;
    let broken = api.submit("p-broken", json!({"n": 11, "then": "broken"}), 0).await;
    let later = api.submit("p-later", json!({"n": 12, "then": "later"}), 0).await;
    for (n, id) in ids.iter().enumerate() {
        api.wait_state(id, "completed").await;
        let t = api.task(id).await;
        assert_eq!(t["output"], json!({"parcel": n, "attempt": 1, "key": format!("p-{n}")}), "{t}");
    }
    api.wait_state(&flaky, "completed").await;
    assert_eq!(api.task(&flaky).await["output"]["attempt"], 2, "retried after the transient failure");
    api.wait_state(&broken, "failed").await;
    api.wait_state(&later, "completed").await;
    let t = api.task(&later).await;
    assert_eq!((t["output"]["attempt"].as_u64(), t["steps"][0]["failure_count"].as_u64()), (Some(2), Some(0)), "{t}");
    let most = parcels.most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "at most 3 steps at once, held {most}");
    stop.send(()).unwrap();
    let stats = run.await.unwrap().unwrap();
    assert_eq!((stats.completed, stats.failed, stats.postponed, stats.dropped), (12, 2, 1, 0), "{stats:?}");
}

async fn heartbeats_keep_a_long_step(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    // Silent for at most 1 s, done within 30 s: a 3 s step lives on heartbeats alone.
    api.register("30s", Some("1s")).await;
    let (stop, run) = spawn(Worker::new(config(&api, "rs-long", 1), Arc::new(Parcels::default())).unwrap());
    let id = api.submit("long", json!({"n": 1, "hold_ms": 3000, "stage": "packing"}), 0).await;
    // The handler's progress report rides on a heartbeat and is read back while the step runs.
    common::wait_for("the step's progress", Duration::from_secs(10), || async {
        let t = api.task(&id).await;
        t["steps"][0]["progress"] == json!({"parcel": 1, "stage": "packing"}) && t["state"] == "running"
    })
    .await;
    api.wait_state(&id, "completed").await;
    let t = api.task(&id).await;
    assert_eq!(t["output"]["attempt"], 1, "never taken back: {t}");
    stop.send(()).unwrap();
    let stats = run.await.unwrap().unwrap();
    assert_eq!((stats.completed, stats.dropped), (1, 0), "{stats:?}");
}

async fn progress_reaches_the_server_without_a_response_window(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    // No response window: heartbeats would not move complete-by (30 s away, first due at 10 s),
    // yet a 3 s step's progress is seen while it runs.
    api.register("30s", None).await;
    let (stop, run) = spawn(Worker::new(config(&api, "rs-progress", 1), Arc::new(Parcels::default())).unwrap());
    let id = api.submit("sorting", json!({"n": 2, "hold_ms": 3000, "stage": "sorting"}), 0).await;
    common::wait_for("the step's progress while it runs", Duration::from_secs(10), || async {
        let t = api.task(&id).await;
        t["steps"][0]["progress"] == json!({"parcel": 2, "stage": "sorting"}) && t["state"] == "running"
    })
    .await;
    api.wait_state(&id, "completed").await;
    stop.send(()).unwrap();
    let stats = run.await.unwrap().unwrap();
    assert_eq!((stats.completed, stats.dropped), (1, 0), "{stats:?}");
}

async fn shutdown_finishes_what_it_holds(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("30s", None).await;
    let parcels = Arc::new(Parcels::default());
    let (stop, run) = spawn(Worker::new(config(&api, "rs-stop", 2), parcels.clone()).unwrap());
    let started = parcels.started.notified();
    let id = api.submit("held", json!({"n": 7, "hold_ms": 1000}), 0).await;
    started.await;
    stop.send(()).unwrap();
    let stats = run.await.unwrap().unwrap();
    assert_eq!(stats.completed, 1, "the held step was finished and answered: {stats:?}");
    assert_eq!(api.task(&id).await["state"], "completed");
}

async fn a_poll_answered_at_shutdown_is_run(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("30s", None).await;
    let mut c = config(&api, "rs-late", 1);
    c.poll_wait = Duration::from_secs(10);
    let (stop, run) = spawn(Worker::new(c, Arc::new(Parcels::default())).unwrap());
    // The poll records its worker before it waits: once listed, the poll is waiting.
    common::wait_for("the worker polls", Duration::from_secs(10), || async {
        api.workers_of().await.contains(&"rs-late".to_owned())
    })
    .await;
    // A step submitted as the worker is told to stop: the waiting poll claims it and answers
    // while the worker stops. It is run and answered, not left held by a worker that is gone
    // until its complete-by 30 s away.
    let id = api.submit("late", json!({"n": 1}), 0).await;
    stop.send(()).unwrap();
    let stats = run.await.unwrap().unwrap();
    let t = api.task(&id).await;
    assert_ne!(t["steps"][0]["state"], "processing", "claimed and never run: {t} {stats:?}");
    assert_eq!((t["state"].as_str(), stats.completed), (Some("completed"), 1), "{t} {stats:?}");
}

async fn a_bad_token_stops_the_worker(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    let mut c = config(&api, "rs-bad", 1);
    c.token = "not-a-token".into();
    let (_stop, run) = spawn(Worker::new(c, Arc::new(Parcels::default())).unwrap());
    let out = tokio::time::timeout(Duration::from_secs(10), run).await.expect("the worker stops").unwrap();
    assert!(matches!(out, Err(ClientError::Refused { status: 401, .. })), "{out:?}");
    let mut c = config(&api, "rs-other", 1);
    c.agents = vec!["not-remote".into()];
    let (_stop, run) = spawn(Worker::new(c, Arc::new(Parcels::default())).unwrap());
    let out = tokio::time::timeout(Duration::from_secs(10), run).await.expect("the worker stops").unwrap();
    assert!(
        matches!(&out, Err(ClientError::Refused { status: 422, code, .. }) if code == "agent_not_remote"),
        "{out:?}"
    );
}

async fn a_restarted_worker_takes_back_its_steps(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    // A minute to complete-by: only the release can bring the steps back within the wait below.
    api.register("60s", None).await;
    let parcels = Arc::new(Parcels::default());
    let (_stop, crashed) = spawn(Worker::new(config(&api, "rs-again", 2), parcels.clone()).unwrap());
    let mut ids = Vec::new();
    for n in 0..2 {
        ids.push(
            api.submit(&format!("again-{n}"), json!({"n": n, "hold_ms": 120_000, "hold_first_only": true}), 0).await,
        );
    }
    common::wait_for("both steps are held", Duration::from_secs(10), || async {
        parcels.now.load(Ordering::SeqCst) == 2
    })
    .await;
    // The process dies with both steps in hand: nothing is answered for them.
    crashed.abort();
    let _ = crashed.await;
    let mut c = config(&api, "rs-again", 2);
    c.release_on_start = true;
    let (stop, run) = spawn(Worker::new(c, parcels.clone()).unwrap());
    for id in &ids {
        common::wait_for("the task completes after the release", Duration::from_secs(15), || async {
            api.task(id).await["state"] == "completed"
        })
        .await;
        let t = api.task(id).await;
        assert_eq!(t["output"]["attempt"], 2, "run again at once by the restarted worker: {t}");
    }
    stop.send(()).unwrap();
    let stats = run.await.unwrap().unwrap();
    assert_eq!((stats.released, stats.completed), (2, 2), "{stats:?}");
}

on_both_stores!(finishes_tasks_within_its_concurrency, finishes_tasks_on_sqlite, finishes_tasks_on_postgres);
on_both_stores!(heartbeats_keep_a_long_step, heartbeats_on_sqlite, heartbeats_on_postgres);
on_both_stores!(progress_reaches_the_server_without_a_response_window, progress_on_sqlite, progress_on_postgres);
on_both_stores!(shutdown_finishes_what_it_holds, shutdown_on_sqlite, shutdown_on_postgres);
on_both_stores!(a_bad_token_stops_the_worker, bad_token_on_sqlite, bad_token_on_postgres);
on_both_stores!(a_poll_answered_at_shutdown_is_run, late_poll_on_sqlite, late_poll_on_postgres);
on_both_stores!(a_restarted_worker_takes_back_its_steps, restarted_on_sqlite, restarted_on_postgres);
