//! Recovery: a step whose agent's process dies while it holds the step. Each round submits one
//! job; a child process (`bench recovery-victim`) claims it and aborts inside the agent call,
//! after printing the claim's complete-by. A rescuer engine in this process (scheduler and
//! supervisor, another instance id, so no restart release helps) must find the lapsed lease and
//! run the step again. The figure is the time from complete-by to the handler's next start.

use super::{BenchError, noop, stats, store_name};
use clap::Args;
use serde_json::{Value, json};
use shiftboss::target::DbTarget;
use shiftboss_core::InstanceId;
use shiftboss_engine::{Agent, AgentCall, AgentError, Engine, EngineConfig, Roles};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Args)]
pub struct RecoveryArgs {
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// The supervisor's sweep interval.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    supervisor_interval: Duration,
    /// The scheduler's fallback poll (the engine's default).
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    poll_interval: Duration,
}

#[derive(Debug, Args)]
pub struct VictimArgs {
    #[arg(long)]
    instance: String,
}

pub async fn run(db: &DbTarget, a: RecoveryArgs) -> anyhow::Result<Value> {
    let store = db.open(true).await?;
    store.register_workflow(&noop::workflow()).await?;
    let run = noop::run_id();
    let mut samples = Vec::new();
    for round in 0..a.rounds {
        let job = noop::job(&run, u64::from(round));
        let key = job.key.clone();
        store.submit_task(job).await?;
        let complete_by_ms = run_victim(db, &format!("bench-victim-{run}-{round}"))?;
        // The victim dies right after its claim; a rescuer started at once would tick its sweep
        // and its poll in step with complete-by (1 s = 2 sweep intervals) and measure luck. A
        // random offset within one interval gives the phase a real supervisor has.
        tokio::time::sleep(a.supervisor_interval.mul_f64(fastrand::f64())).await;

        let starts = noop::Starts::default();
        let mut config = EngineConfig { roles: Roles::default(), ..noop::config(8) };
        config.scheduler.poll_interval = a.poll_interval;
        config.supervisor.interval = a.supervisor_interval;
        config.supervisor.leader_ttl = (a.supervisor_interval * 8).max(Duration::from_secs(2));
        let engine = Engine::builder(store.clone(), InstanceId::new("bench-rescuer")?)
            .agent("noop", noop::Noop { starts: Some(starts.clone()) })
            .config(config)
            .build()?;
        // Wall-clock time of an Instant: complete-by is on the store's clock (this host's clock
        // for SQLite, PostgreSQL's clock_timestamp() on this same host).
        let (anchor, anchor_wall) = (Instant::now(), wall_ms());
        let running = engine.start();
        let give_up = Instant::now() + Duration::from_secs(30);
        let started = loop {
            if let Some(t) = starts.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
                break Some(*t);
            }
            if Instant::now() > give_up {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        running.shutdown().await;
        let Some(t) = started else { continue };
        let start_wall = anchor_wall + t.duration_since(anchor).as_secs_f64() * 1000.0;
        let ms = start_wall - complete_by_ms as f64;
        eprintln!("bench recovery: round {round}: complete-by to next start {ms:.1} ms");
        samples.push(ms);
    }
    let recovered = samples.len();
    let s = stats::summary(samples).ok_or(BenchError::NoSamples("recovery"))?;
    Ok(json!({
        "workload": "recovery", "store": store_name(db), "rounds": a.rounds, "recovered": recovered,
        "supervisor_interval_ms": a.supervisor_interval.as_millis() as u64,
        "poll_interval_ms": a.poll_interval.as_millis() as u64, "step_timeout_ms": 1000, "latency": s,
    }))
}

fn wall_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Runs the victim process to its death; returns the complete-by of the claim it died holding.
fn run_victim(db: &DbTarget, instance: &str) -> anyhow::Result<i64> {
    let mut child = Command::new(std::env::current_exe()?)
        .env("SHIFTBOSS_DB", db.raw())
        .args(["bench", "recovery-victim", "--instance", instance])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    let stdout = child.stdout.take().ok_or_else(|| BenchError::Victim("no stdout".into()))?;
    BufReader::new(stdout).read_line(&mut line)?;
    let status = child.wait()?;
    if status.success() {
        return Err(BenchError::Victim(format!("it exited normally ({line:?})")).into());
    }
    let v: Value = serde_json::from_str(line.trim()).map_err(|e| BenchError::Victim(format!("{e}: {line:?}")))?;
    v["complete_by"].as_i64().ok_or_else(|| BenchError::Victim(format!("no complete_by in {line:?}")).into())
}

/// The agent that dies: it reports the claim's complete-by, then aborts the whole process.
struct Dies;

#[async_trait::async_trait]
impl Agent for Dies {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", json!({ "complete_by": call.complete_by.0 }));
        let _ = out.flush();
        std::process::abort();
    }
}

pub async fn victim(db: &DbTarget, a: VictimArgs) -> anyhow::Result<()> {
    let store = db.open(false).await?;
    let mut config = noop::config(1);
    config.roles = Roles { scheduler: true, supervisor: false, dispatcher: false };
    let engine = Engine::builder(store, InstanceId::new(a.instance)?).agent("noop", Dies).config(config).build()?;
    let _running = engine.start();
    tokio::time::sleep(Duration::from_secs(30)).await;
    Err(BenchError::Victim("claimed nothing in 30 s".into()).into())
}
