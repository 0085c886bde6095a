//! Load-balance buckets (M3) in the engine: explicit lists and weighted shares among live
//! schedulers, on one SQLite file, against a real HTTP service on loopback.

mod support;

use serde_json::json;
use shiftboss_core::buckets::{Member, share};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskId, TaskState};
use shiftboss_engine::{BucketPolicy, Engine, EngineConfig, HttpAgent};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Heartbeat, Store, SubmitTask};
use std::sync::Arc;
use std::time::Duration;
use support::Service;

fn engine(path: &std::path::Path, svc: &Service, id: &str, buckets: BucketPolicy) -> Engine {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path, &OpenOptions::default()).unwrap());
    let mut config = EngineConfig::default();
    config.scheduler.poll_interval = Duration::from_millis(20);
    config.scheduler.buckets = buckets;
    // Long enough that a heartbeat held up behind other writes on a loaded machine does not lapse
    // (a lapse re-shares the buckets mid-test); a scheduler that stops signs off at once anyway.
    config.scheduler.heartbeat_ttl = Duration::from_secs(3);
    Engine::builder(store, InstanceId::new(id).unwrap())
        .agent("svc", HttpAgent::for_service(&svc.base, support::loopback()).unwrap())
        .config(config)
        .build()
        .unwrap()
}

fn workflow() -> WorkflowDef {
    WorkflowDef::from_json(r#"{"name":"w","steps":[{"name":"a","agent":"svc","config":{"url":"/a"},"timeout":"5s"}]}"#)
        .unwrap()
}

async fn submit_all(e: &Engine, prefix: &str, n: usize) -> Vec<TaskId> {
    let mut ids = Vec::new();
    for i in 0..n {
        let t = SubmitTask {
            correlation_id: None,
            domains: Default::default(),
            notify: None,
            key: format!("{prefix}-{i}"),
            workflow: "w".into(),
            version: None,
            input: json!({}),
            priority: 0,
            actor: "test".into(),
        };
        ids.push(e.submit(t).await.unwrap().task_id);
    }
    ids
}

async fn wait_all(store: &Arc<dyn Store>, ids: &[TaskId]) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    for id in ids {
        loop {
            if store.get_task(*id).await.unwrap().unwrap().task.state == TaskState::Completed {
                break;
            }
            assert!(tokio::time::Instant::now() < give_up, "task {id} did not complete");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Who claimed each task's step, and the task's bucket.
async fn claims(store: &Arc<dyn Store>, ids: &[TaskId]) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    for id in ids {
        let d = store.get_task(*id).await.unwrap().unwrap();
        for e in d.events.iter().filter(|e| e.kind == "step.claimed") {
            out.push((e.actor.clone(), d.task.bucket));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedulers_with_bucket_lists_claim_only_their_own() {
    let svc = Service::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let a = engine(&path, &svc, "a", BucketPolicy::List((0..128).collect()));
    let b = engine(&path, &svc, "b", BucketPolicy::List((128..256).collect()));
    a.register_workflow(&workflow()).await.unwrap();
    let (ra, rb) = (a.start(), b.start());
    let ids = submit_all(&a, "t", 80).await;
    wait_all(a.store(), &ids).await;
    ra.shutdown().await;
    rb.shutdown().await;
    let c = claims(a.store(), &ids).await;
    assert_eq!(c.len(), 80);
    for (who, bucket) in &c {
        let ok = if who == "a" { *bucket < 128 } else { *bucket >= 128 };
        assert!(ok, "{who} claimed a step in bucket {bucket}");
    }
    assert!(c.iter().any(|(w, _)| w == "a") && c.iter().any(|(w, _)| w == "b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_buckets_follow_the_live_schedulers() {
    let svc = Service::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let a = engine(&path, &svc, "a", BucketPolicy::Share { weight: 1 });
    let b = engine(&path, &svc, "b", BucketPolicy::Share { weight: 3 });
    a.register_workflow(&workflow()).await.unwrap();
    // Both are known to be alive before either claims, so the split is fixed from the start.
    for (id, weight) in [("a", 1), ("b", 3)] {
        let beat = Heartbeat { instance: InstanceId::new(id).unwrap(), weight, ttl: Duration::from_secs(60) };
        a.store().heartbeat(beat).await.unwrap();
    }
    let live = [Member { instance: "a".into(), weight: 1 }, Member { instance: "b".into(), weight: 3 }];
    let (share_a, share_b) = (share(&live, "a"), share(&live, "b"));
    let (ra, rb) = (a.start(), b.start());
    let ids = submit_all(&a, "t", 80).await;
    wait_all(a.store(), &ids).await;
    for (who, bucket) in claims(a.store(), &ids).await {
        let mine = if who == "a" { &share_a } else { &share_b };
        assert!(mine.contains(&bucket), "{who} claimed a step in bucket {bucket}, outside its share");
    }

    // b stops and signs off: a's next heartbeat gives it every bucket, and it finishes new work alone.
    rb.shutdown().await;
    let more = submit_all(&a, "u", 40).await;
    wait_all(a.store(), &more).await;
    ra.shutdown().await;
    let c = claims(a.store(), &more).await;
    assert!(c.iter().all(|(w, _)| w == "a"));
    assert!(c.iter().any(|(_, bucket)| share_b.contains(bucket)), "a took over b's buckets");
}
