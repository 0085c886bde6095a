//! Retry jobs end to end on a SQLite file: handlers' results and exceptions, load-balance numbers
//! and handler filters across two servers, the archiver, and a client that only enqueues.

use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_core::jobs::{Balance, JobState};
use shiftboss_core::{InstanceId, TaskId};
use shiftboss_engine::{
    Agent, AgentCall, AgentError, BucketPolicy, ClientConfig, Engine, EngineConfig, Exception, JobClient, JobOptions,
    Roles, Verdict,
};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{JobPlace, JobQuery, JobRecord, JobRef, Store};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

fn config(roles: Roles) -> EngineConfig {
    let mut c = EngineConfig { roles, ..EngineConfig::default() };
    c.scheduler.poll_interval = Duration::from_millis(20);
    c.supervisor.interval = Duration::from_millis(50);
    c.supervisor.leader_ttl = Duration::from_secs(2);
    c
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        Fixture { _dir: dir, path }
    }

    fn store(&self) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(&self.path, &OpenOptions::default()).unwrap())
    }
}

/// A handler that answers by a script, one entry per call (the last repeats), and tells the test
/// about each call: (instance, task id, bucket-carrying params).
struct Scripted {
    script: Vec<Answer>,
    calls: Mutex<HashMap<i64, usize>>,
    seen: mpsc::UnboundedSender<(String, Value)>,
    instance: String,
}

#[derive(Clone)]
enum Answer {
    Ok,
    Fail(&'static str),
    Error(AgentError),
    Panic,
}

#[async_trait]
impl Agent for Scripted {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        let n = {
            let mut calls = self.calls.lock().unwrap();
            let n = calls.entry(call.task_id.0).or_default();
            *n += 1;
            *n
        };
        let _ = self.seen.send((self.instance.clone(), call.input.clone()));
        match self.script[(n - 1).min(self.script.len() - 1)].clone() {
            Answer::Ok => Ok(json!({"call": n})),
            Answer::Fail(why) => Err(AgentError::Failure(why.into())),
            Answer::Error(e) => Err(e),
            Answer::Panic => panic!("handler bug on call {n}"),
        }
    }
}

fn scripted(instance: &str, script: Vec<Answer>) -> (Scripted, mpsc::UnboundedReceiver<(String, Value)>) {
    let (seen, rx) = mpsc::unbounded_channel();
    (Scripted { script, calls: Mutex::default(), seen, instance: instance.into() }, rx)
}

/// Waits until the job reaches a finished state; a bounded wait on the store, not a fixed sleep.
async fn finished(store: &Arc<dyn Store>, id: TaskId) -> JobRecord {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let job = store.find_job(JobRef::Id(id)).await.unwrap().expect("the job exists");
        if job.state.is_finished() {
            return job;
        }
        assert!(tokio::time::Instant::now() < give_up, "job {id} did not finish: {job:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_on_schedule_and_the_exception_strategy_maps_errors_and_panics() {
    let fx = Fixture::new();
    let (flaky, _r1) = scripted("s", vec![Answer::Fail("503 from smtp"), Answer::Fail("503 again"), Answer::Ok]);
    let (duplicate, _r2) = scripted("s", vec![Answer::Error(AgentError::Permanent("duplicate: already sent".into()))]);
    let (invalid, _r3) = scripted("s", vec![Answer::Error(AgentError::Permanent("invalid address".into()))]);
    let (panicky, _r4) = scripted("s", vec![Answer::Panic, Answer::Ok]);
    let (doomed, _r5) = scripted("s", vec![Answer::Panic]);
    let strategy = |e: Exception<'_>| match e {
        Exception::Error(AgentError::Permanent(m)) if m.starts_with("duplicate") => {
            Verdict::Succeeded(json!({"duplicate": true}))
        }
        Exception::Error(AgentError::Permanent(m)) => Verdict::GaveUp(format!("refused: {m}")),
        _ => Verdict::AsIs,
    };
    let gives_up_on_panic = |e: Exception<'_>| match e {
        Exception::Panic(m) => Verdict::GaveUp(format!("bug: {m}")),
        _ => Verdict::AsIs,
    };
    let engine = Engine::builder(fx.store(), InstanceId::new("s").unwrap())
        .agent("flaky", flaky)
        .agent("duplicate", duplicate)
        .agent("invalid", invalid)
        .agent("panicky", panicky)
        .agent("doomed", doomed)
        .exception_strategy("duplicate", strategy)
        .exception_strategy("invalid", strategy)
        .exception_strategy("doomed", gives_up_on_panic)
        .config(config(Roles::default()))
        .build()
        .unwrap();
    let running = engine.start();
    let jobs = engine.jobs();
    let opts = || JobOptions::default().intervals([Duration::from_millis(5); 3]);
    let mut ids = HashMap::new();
    for h in ["flaky", "duplicate", "invalid", "panicky", "doomed"] {
        ids.insert(h, jobs.enqueue(h, json!({"h": h}), opts()).await.unwrap().task_id);
    }
    let store = engine.store().clone();
    let flaky = finished(&store, ids["flaky"]).await;
    assert_eq!((flaky.state, flaky.retries, flaky.attempts), (JobState::Succeeded, 2, 3));
    assert_eq!(flaky.last_error.as_deref(), Some("503 again"), "the last failure's reason is kept");
    let dup = finished(&store, ids["duplicate"]).await;
    assert_eq!((dup.state, dup.output), (JobState::Succeeded, Some(json!({"duplicate": true}))));
    let inv = finished(&store, ids["invalid"]).await;
    assert_eq!((inv.state, inv.attempts), (JobState::GivenUp, 1), "given up at once, no retry");
    assert_eq!(inv.last_error.as_deref(), Some("refused: invalid address"));
    let pan = finished(&store, ids["panicky"]).await;
    assert_eq!((pan.state, pan.retries), (JobState::Succeeded, 1), "a panic is a failed try by default");
    assert!(pan.last_error.unwrap().contains("handler bug on call 1"));
    let doom = finished(&store, ids["doomed"]).await;
    assert_eq!((doom.state, doom.attempts), (JobState::GivenUp, 1));
    assert!(doom.last_error.unwrap().starts_with("bug: handler bug"));
    assert_eq!(engine.metrics().panics, 2);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_with_disjoint_buckets_never_run_each_others_jobs() {
    let fx = Fixture::new();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let server = |name: &str, buckets: std::ops::Range<u16>| {
        let agent = Scripted {
            script: vec![Answer::Ok],
            calls: Mutex::default(),
            seen: seen_tx.clone(),
            instance: name.into(),
        };
        let mut c = config(Roles::default());
        c.scheduler.buckets = BucketPolicy::List(buckets.collect());
        c.scheduler.agents = Some(vec!["mail".into()]);
        let (sms, _) = scripted(name, vec![Answer::Ok]);
        Engine::builder(fx.store(), InstanceId::new(name).unwrap())
            .agent("mail", agent)
            .agent("sms", sms)
            .config(c)
            .build()
            .unwrap()
    };
    let (a, b) = (server("server-a", 0..128), server("server-b", 128..256));
    // A client that only enqueues: no engine, round robin over every bucket.
    let client =
        JobClient::new(fx.store(), ClientConfig { balance: Balance::RoundRobin, ..Default::default() }, "app").unwrap();
    let mut expected = HashMap::new();
    for n in 0..256u32 {
        let s = client.enqueue("mail", json!({"n": n}), JobOptions::default()).await.unwrap();
        expected.insert(n, s.task_id);
    }
    let sms = client.enqueue("sms", json!({"n": 999}), JobOptions::default()).await.unwrap().task_id;
    let (ra, rb) = (a.start(), b.start());
    let mut ran: HashMap<u32, String> = HashMap::new();
    while ran.len() < 256 {
        let (who, input) = tokio::time::timeout(Duration::from_secs(20), seen.recv()).await.unwrap().unwrap();
        let n = input["n"].as_u64().unwrap() as u32;
        assert!(ran.insert(n, who).is_none(), "job {n} ran twice");
    }
    ra.shutdown().await;
    rb.shutdown().await;
    let store = fx.store();
    for (n, who) in &ran {
        let job = store.find_job(JobRef::Id(expected[n])).await.unwrap().unwrap();
        let owner = if job.bucket < 128 { "server-a" } else { "server-b" };
        assert_eq!(who, owner, "job {n} in bucket {} ran on the other server", job.bucket);
        assert_eq!(job.state, JobState::Succeeded);
    }
    assert_eq!(ran.values().filter(|w| *w == "server-a").count(), 128, "round robin: half each");
    let sms = store.find_job(JobRef::Id(sms)).await.unwrap().unwrap();
    assert_eq!(sms.state, JobState::Pending, "no server serves sms: it waits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archiver_moves_finished_jobs_to_history_and_leaves_live_ones() {
    let fx = Fixture::new();
    let (mail, _rx) = scripted("s", vec![Answer::Ok]);
    let mut c = config(Roles { scheduler: true, supervisor: false, dispatcher: false });
    c.supervisor.archive.after = Duration::ZERO;
    let engine =
        Engine::builder(fx.store(), InstanceId::new("s").unwrap()).agent("mail", mail).config(c).build().unwrap();
    let done = engine.jobs().enqueue("mail", json!({"n": 1}), JobOptions::default()).await.unwrap().task_id;
    let later = JobOptions::default().delay(Duration::from_secs(3600)).unique_key("tomorrow");
    let waiting = engine.jobs().enqueue("mail", json!({"n": 2}), later).await.unwrap().task_id;
    let running = engine.start();
    finished(engine.store(), done).await;
    running.shutdown().await;
    let report = engine.supervisor().archive_once().await.unwrap();
    assert_eq!(report.tasks, 1);
    let store = engine.store();
    let hist = store.list_jobs(JobQuery { place: JobPlace::History, ..Default::default() }).await.unwrap();
    assert_eq!(hist.iter().map(|j| j.id).collect::<Vec<_>>(), [done]);
    let live = store.list_jobs(JobQuery::default()).await.unwrap();
    assert_eq!(live.iter().map(|j| (j.id, j.state)).collect::<Vec<_>>(), [(waiting, JobState::Pending)]);
    let again = engine.jobs().enqueue("mail", json!({"n": 2}), JobOptions::default().unique_key("tomorrow")).await;
    assert_eq!(again.unwrap().task_id, waiting, "the unique key gives back the waiting job");
}
