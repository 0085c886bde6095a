//! Pickup latency: the time from a submission's commit to its agent's call arriving at the remote
//! service, with the scheduler in another process (`shiftboss serve`) on an idle system.
//!
//! cargo build --release -p shiftboss    # the serve process is the product's binary, built first
//! cargo run --release -p shiftboss-lab --example pickup -- DB_URL [COUNT] [INTERVAL_MS]
//! DB_URL is `sqlite:PATH` or `postgres://...?schema=NAME` (a fresh schema: it is dropped by no one).
//! Prints p50, p99 and max. Both ends are timed on this process's clock.

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::{Store, SubmitTask};
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).cloned().unwrap_or_else(|| "sqlite:pickup.db".into());
    let count: usize = args.get(2).map_or(Ok(300), |s| s.parse())?;
    let interval = Duration::from_millis(args.get(3).map_or(Ok(10), |s| s.parse())?);

    let arrivals: Arrivals = Arc::default();
    let app = Router::new()
        .route(
            "/hit",
            post(|State(a): State<Arrivals>, body: String| async move {
                let now = Instant::now();
                if let Some(k) =
                    serde_json::from_str::<Value>(&body).ok().and_then(|v| v["k"].as_str().map(String::from))
                {
                    a.lock().unwrap().insert(k, now);
                }
                "{}"
            }),
        )
        .with_state(arrivals.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sink = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let store: Arc<dyn Store> = if let Some(path) = url.strip_prefix("sqlite:") {
        Arc::new(shiftboss_sqlite::SqliteStore::open(path, &shiftboss_sqlite::OpenOptions::default())?)
    } else {
        let (base, schema) = url.split_once("?schema=").unwrap_or((&url, "shiftboss"));
        let opts = shiftboss_postgres::PgOptions { schema: schema.into(), ..Default::default() };
        Arc::new(shiftboss_postgres::PostgresStore::connect(base, &opts).await?)
    };
    let wf = WorkflowDef::from_json(
        r#"{"name":"pickup","steps":[{"name":"hit","agent":"sink","config":{"url":"/hit"},"timeout":"5s"}]}"#,
    )?;
    store.register_workflow(&wf).await?;

    // target/<profile>/examples/pickup -> target/<profile>/shiftboss
    let exe = std::env::current_exe()?.parent().unwrap().parent().unwrap().join("shiftboss");
    anyhow::ensure!(exe.exists(), "{} is missing: build it first (cargo build -p shiftboss)", exe.display());
    let mut serve = Command::new(exe)
        .env("SHIFTBOSS_DB", &url)
        .args(["serve", "--instance-id", "pickup-bench", "--roles", "scheduler", "--stop-when-stdin-closes"])
        .args(["--agent", &format!("sink={sink}")])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    // Let it start and go idle.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let run = format!("{:x}", fastrand::u64(..));
    let mut submitted = HashMap::new();
    for i in 0..count {
        let k = format!("{run}-{i}");
        let t = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: k.clone(),
            workflow: "pickup".into(),
            version: None,
            input: json!({ "k": k }),
            priority: 0,
            actor: "bench".into(),
        };
        store.submit_task(t).await?;
        submitted.insert(k, Instant::now());
        tokio::time::sleep(interval).await;
    }
    let give_up = Instant::now() + Duration::from_secs(30);
    while arrivals.lock().unwrap().len() < count && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(serve.stdin.take());
    let _ = serve.wait();

    let a = arrivals.lock().unwrap();
    let mut lat: Vec<f64> = submitted
        .iter()
        .filter_map(|(k, t0)| a.get(k).map(|t1| t1.saturating_duration_since(*t0).as_secs_f64() * 1000.0))
        .collect();
    lat.sort_by(f64::total_cmp);
    if lat.is_empty() {
        anyhow::bail!("no call arrived");
    }
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
    println!(
        "pickup latency over {} of {count} tasks, one every {} ms: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        interval.as_millis(),
        q(0.5),
        q(0.99),
        lat[lat.len() - 1]
    );
    Ok(())
}
