//! Remote workers (issue 17): one-step no-op steps of the agent type `noop`, run by `--workers`
//! worker processes against a running serve (`bench/run` starts it with `--remote-agent noop`):
//! with `--protocol native`, the `shiftboss-worker` client (`--concurrency` slots, polling in
//! batches, replies in batches); with `--protocol conductor`, a loop that speaks Conductor's API
//! as its SDKs do (a batch poll for the free slots, then one `POST /api/tasks` per task).
//!
//! Two phases. Throughput: `--steps` tasks are submitted through the API's batch route before the
//! workers start; the clock runs from their start to the moment no task runs any more (one task
//! asked for by state, every 20 ms). Pickup: with the workers idle in their long polls, one task
//! every `--pickup-every-ms`; each carries the wall time just before its submit call, and the
//! handler that receives it notes the difference (one machine, one clock). Each worker prints what
//! it noted when stopped with SIGTERM.

use super::stats::{round3, summary};
use clap::Args;
use serde_json::{Value, json};
use shiftboss_worker::{Failure, Handler, Step, Worker, WorkerConfig};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncReadExt;

const AGENT: &str = "noop";

#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// The API's base URL, such as http://127.0.0.1:8080.
    #[arg(long)]
    url: String,
    /// A file holding a token with the admin scope (the first admin token's file).
    #[arg(long)]
    token_file: PathBuf,
    /// Tasks of the throughput phase.
    #[arg(long, default_value_t = 20_000)]
    steps: u32,
    /// Worker processes.
    #[arg(long, default_value_t = 1)]
    workers: u32,
    /// Steps each worker runs at once (and so asks for in one poll).
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Tasks of the pickup phase, one every `--pickup-every-ms`.
    #[arg(long, default_value_t = 200)]
    pickups: u32,
    #[arg(long, default_value_t = 10)]
    pickup_every_ms: u64,
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    #[arg(long, value_enum, default_value_t = Protocol::Native)]
    protocol: Protocol,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    Native,
    Conductor,
}

/// One worker process of the bench.
#[derive(Debug, Args)]
pub struct RemoteWorkerArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    token_file: PathBuf,
    #[arg(long)]
    id: String,
    #[arg(long)]
    concurrency: usize,
    #[arg(long, value_enum, default_value_t = Protocol::Native)]
    protocol: Protocol,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Does nothing; notes the pickup of the steps that carry their submission's time.
#[derive(Default)]
struct Noop {
    pickups_ms: Mutex<Vec<f64>>,
}

#[async_trait::async_trait]
impl Handler for Noop {
    async fn run(&self, step: &Step) -> Result<Value, Failure> {
        if let Some(t) = step.input["submitted_us"].as_u64() {
            let ms = now_us().saturating_sub(t) as f64 / 1000.0;
            self.pickups_ms.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(ms);
        }
        Ok(json!({}))
    }
}

pub async fn worker(a: RemoteWorkerArgs) -> anyhow::Result<()> {
    let token = std::fs::read_to_string(&a.token_file)?.trim().to_owned();
    if a.protocol == Protocol::Conductor {
        return conductor_worker(a, token).await;
    }
    let mut config = WorkerConfig::new(a.url, token, a.id, [AGENT]);
    config.concurrency = a.concurrency;
    let noop = Arc::new(Noop::default());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let stats = Worker::new(config, noop.clone())?
        .run(async move {
            term.recv().await;
        })
        .await?;
    let pickups = std::mem::take(&mut *noop.pickups_ms.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    println!("{}", json!({"completed": stats.completed, "dropped": stats.dropped, "pickups_ms": pickups}));
    Ok(())
}

/// A worker as Conductor's SDKs run one: a batch poll for the free slots (long poll), a task per
/// polled task, and one `POST /api/tasks` with COMPLETED for each.
async fn conductor_worker(a: RemoteWorkerArgs, token: String) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let slots = Arc::new(tokio::sync::Semaphore::new(a.concurrency.max(1)));
    let pickups = Arc::new(Mutex::new(Vec::new()));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (mut completed, mut running) = (0u64, tokio::task::JoinSet::new());
    loop {
        let free = slots.available_permits().max(1);
        let url = format!("{}/api/tasks/poll/batch/{AGENT}?count={free}&timeout=2000&workerid={}", a.url, a.id);
        let polled = tokio::select! {
            _ = term.recv() => break,
            r = http.get(&url).header("X-Authorization", &token).send() => r?,
        };
        let tasks: Vec<Value> = if polled.status().as_u16() == 200 { polled.json().await? } else { Vec::new() };
        for t in tasks {
            if let Some(us) = t["inputData"]["submitted_us"].as_u64() {
                let ms = now_us().saturating_sub(us) as f64 / 1000.0;
                pickups.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(ms);
            }
            let permit = slots.clone().acquire_owned().await?;
            let (http, url, token) = (http.clone(), format!("{}/api/tasks", a.url), token.clone());
            running.spawn(async move {
                let result = json!({"taskId": t["taskId"], "workflowInstanceId": t["workflowInstanceId"],
                                    "status": "COMPLETED", "outputData": {}});
                let res = http.post(&url).header("X-Authorization", &token).json(&result).send().await;
                drop(permit);
                res.is_ok_and(|r| r.status().is_success())
            });
        }
        while let Some(done) = running.try_join_next() {
            completed += u64::from(done.unwrap_or(false));
        }
    }
    while let Some(done) = running.join_next().await {
        completed += u64::from(done.unwrap_or(false));
    }
    let pickups = std::mem::take(&mut *pickups.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    println!("{}", json!({"completed": completed, "dropped": 0, "pickups_ms": pickups}));
    Ok(())
}

struct Api {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Api {
    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let res = self.http.post(format!("{}{path}", self.url)).bearer_auth(&self.token).json(body).send().await?;
        let status = res.status();
        let text = res.text().await?;
        anyhow::ensure!(status.is_success(), "POST {path}: {status} {text}");
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Completed tasks, from the scrape's `shiftboss_tasks{state="completed"}`.
    async fn completed(&self) -> anyhow::Result<u64> {
        let res = self.http.get(format!("{}/metrics", self.url)).bearer_auth(&self.token).send().await?;
        let text = res.text().await?;
        let line = text.lines().find(|l| l.starts_with("shiftboss_tasks{state=\"completed\"}"));
        Ok(line.and_then(|l| l.rsplit(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0))
    }

    /// Whether some task is still running: one task asked for, through the state's index.
    async fn any_running(&self) -> anyhow::Result<bool> {
        let res = self
            .http
            .get(format!("{}/v1/tasks?state=running&limit=1", self.url))
            .bearer_auth(&self.token)
            .send()
            .await?;
        let status = res.status();
        let page: Value = res.json().await?;
        anyhow::ensure!(status.is_success(), "GET /v1/tasks: {status} {page}");
        Ok(page["items"].as_array().is_some_and(|items| !items.is_empty()))
    }

    /// When no task runs any more, having checked once that `n` completed (a task that failed
    /// would end the wait too). The wait asks every 20 ms whether any task still runs: a scrape
    /// every 20 ms, which counts every task and live step, took a good part of the server's CPU
    /// from the drain it timed.
    async fn wait_completed(&self, n: u64, give_up: Instant) -> anyhow::Result<Instant> {
        loop {
            if !self.any_running().await? {
                let at = Instant::now();
                let completed = self.completed().await?;
                anyhow::ensure!(completed >= n, "no task runs, but {completed} of {n} completed");
                return Ok(at);
            }
            anyhow::ensure!(Instant::now() < give_up, "{n} tasks not completed in time");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn run(a: RemoteArgs) -> anyhow::Result<Value> {
    let token = std::fs::read_to_string(&a.token_file)?.trim().to_owned();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let api = Api { http, url: a.url.clone(), token };
    let flow = json!({"name": "bench-remote", "steps": [{"name": "noop", "agent": AGENT}]});
    api.post("/v1/workflows", &flow).await?;
    let run = super::noop::run_id();
    let give_up = Instant::now() + a.timeout;
    let before = api.completed().await?;

    let keys: Vec<u32> = (0..a.steps).collect();
    for chunk in keys.chunks(500) {
        let tasks: Vec<Value> = chunk
            .iter()
            .map(|n| json!({"key": format!("{run}-{n}"), "workflow": "bench-remote", "input": {}}))
            .collect();
        api.post("/v1/tasks/batch", &json!({"tasks": tasks})).await?;
    }
    let t0 = Instant::now();
    let mut workers = Vec::new();
    for w in 0..a.workers.max(1) {
        let child = tokio::process::Command::new(std::env::current_exe()?)
            .args(["bench", "remote-worker", "--url", &a.url, "--token-file"])
            .arg(&a.token_file)
            .args(["--id", &format!("bench-{run}-{w}"), "--concurrency", &a.concurrency.to_string()])
            .args(["--protocol", if a.protocol == Protocol::Conductor { "conductor" } else { "native" }])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        workers.push(child);
    }
    let drained_at = api.wait_completed(before + u64::from(a.steps), give_up).await?;
    let drain_s = (drained_at - t0).as_secs_f64();

    let every = Duration::from_millis(a.pickup_every_ms.max(1));
    // The submission's own call, timed beside the pickup it starts: what of the pickup is the
    // submission's (its answer and the worker's step leave the server at about the same time).
    let mut submits = Vec::with_capacity(a.pickups as usize);
    for n in 0..a.pickups {
        let input = json!({"submitted_us": now_us()});
        let sent = std::time::Instant::now();
        api.post("/v1/tasks", &json!({"key": format!("{run}-pickup-{n}"), "workflow": "bench-remote", "input": input}))
            .await?;
        submits.push(sent.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(every).await;
    }
    api.wait_completed(before + u64::from(a.steps + a.pickups), give_up).await?;

    let mut pickups = Vec::new();
    for mut child in workers {
        if let Some(pid) = child.id() {
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(i32::try_from(pid)?).ok_or_else(|| anyhow::anyhow!("pid 0"))?,
                rustix::process::Signal::TERM,
            )?;
        }
        let mut out = String::new();
        if let Some(mut stdout) = child.stdout.take() {
            tokio::time::timeout(Duration::from_secs(30), stdout.read_to_string(&mut out)).await??;
        }
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await??;
        anyhow::ensure!(status.success(), "a worker ended with {status}");
        let report: Value = serde_json::from_str(out.trim())?;
        pickups.extend(report["pickups_ms"].as_array().into_iter().flatten().filter_map(Value::as_f64));
    }
    Ok(json!({
        "workload": "remote_workers", "protocol": format!("{:?}", a.protocol).to_lowercase(),
        "steps": a.steps, "workers": a.workers, "concurrency": a.concurrency,
        "drain_s": round3(drain_s), "steps_per_s": round3(f64::from(a.steps) / drain_s),
        "pickup": summary(pickups), "submit": summary(submits),
    }))
}
