//! Retry jobs, measured: the enqueue rate, the run rate of a no-op handler, and the claim's cost
//! with an empty history and with `--history` finished jobs in it (it must not grow).
//!
//! ```sh
//! cargo run --release -p shiftboss-lab --example jobs_bench -- --jobs 20000 --history 1000000
//! cargo run --release -p shiftboss-lab --example jobs_bench -- --pg postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! SQLite runs on a new file in a temporary directory (synchronous FULL, the store's default);
//! PostgreSQL in a new schema, dropped at the end. History is filled by one bulk INSERT (through
//! `sqlite3`-compatible SQL on the file, or `psql`), not by running a million jobs: what is
//! measured is whether the claim's cost depends on the history's size.

use async_trait::async_trait;
use serde_json::json;
use shiftboss_core::InstanceId;
use shiftboss_engine::{Agent, AgentCall, AgentError, Engine, EngineConfig, JobClient, JobOptions, Roles};
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{ClaimDueSteps, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Noop;

#[async_trait]
impl Agent for Noop {
    async fn call(&self, _: &AgentCall) -> Result<serde_json::Value, AgentError> {
        Ok(json!({}))
    }
}

struct Args {
    jobs: u64,
    history: u64,
    claims: u32,
    pg: Option<String>,
}

fn args() -> Args {
    let mut a = Args { jobs: 20_000, history: 1_000_000, claims: 50, pg: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--jobs" => a.jobs = value.parse().expect("--jobs N"),
            "--history" => a.history = value.parse().expect("--history N"),
            "--claims" => a.claims = value.parse().expect("--claims N"),
            "--pg" => a.pg = Some(value),
            other => panic!("unknown flag {other}; flags: --jobs N --history N --claims N --pg URL"),
        }
    }
    a
}

/// Where the store lives, and how to fill its history in bulk.
enum Backend {
    Sqlite { _dir: tempfile::TempDir, path: std::path::PathBuf },
    Postgres { url: String, schema: String },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite { .. } => "SQLite (synchronous FULL)",
            Backend::Postgres { .. } => "PostgreSQL (synchronous_commit on)",
        }
    }

    async fn open(&self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite { path, .. } => Arc::new(SqliteStore::open(path, &OpenOptions::default()).unwrap()),
            Backend::Postgres { url, schema } => {
                let opts = PgOptions { schema: schema.clone(), pool_size: 8, ..PgOptions::default() };
                Arc::new(PostgresStore::connect(url, &opts).await.unwrap())
            }
        }
    }

    /// Adds `n` finished jobs (a task, a step and two events each) to the history tables.
    fn fill_history(&self, n: u64) {
        let tasks =
            "INSERT INTO tasks_history (id, task_key, workflow, workflow_version, state, priority, input, output,
                         created_at, updated_at, bucket, depth)
                     SELECT -i, 'old-' || i, 'job:noop', 1, 'completed', 0, '{}', '{}', 0, i, i % 256, 0 FROM n";
        let steps = "INSERT INTO steps_history (id, task_id, name, agent, state, lease_token, due_at, priority,
                         failure_count, attempts, input, output, idempotency_key, timeout_ms, config, created_at,
                         updated_at, bucket, kind, on_timeout)
                     SELECT -i, -i, 'run', 'noop', 'processed', 1, 0, 0, 0, 1, '{}', '{}', 'old-' || i, 30000, '{}',
                         0, i, i % 256, 'agent', 'retry' FROM n";
        let events = "INSERT INTO events_history (id, task_id, step_id, at, kind, level, actor, detail)
                      SELECT -2 * i - k, -i, NULL, i, 'task.received', 'info', 'bench', '{}'
                      FROM n, (SELECT 0 AS k UNION ALL SELECT 1) AS two";
        match self {
            Backend::Sqlite { path, .. } => {
                let c = rusqlite::Connection::open(path).unwrap();
                let series = format!("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n})");
                let sql = format!(
                    "BEGIN; {series} {tasks}; {series} {steps}; {series} {events}; COMMIT; ANALYZE; \
                     PRAGMA wal_checkpoint(TRUNCATE);"
                );
                c.execute_batch(&sql).unwrap();
            }
            Backend::Postgres { url, schema } => {
                let series = format!("WITH n(i) AS (SELECT generate_series(1, {n})::bigint)");
                let sql = format!(
                    "SET search_path = {schema}; BEGIN; {series} {tasks}; {series} {steps}; {series} {events}; COMMIT;"
                );
                // Vacuumed here, so that no autovacuum of the new rows runs while the claim is timed.
                let vacuum =
                    format!("VACUUM ANALYZE {schema}.tasks_history, {schema}.steps_history, {schema}.events_history");
                let out = std::process::Command::new("psql")
                    // And a checkpoint, so that writing the fill's pages out does not slow the
                    // commits being timed.
                    .args([url.as_str(), "-qc", &sql, "-c", &vacuum, "-c", "CHECKPOINT"])
                    .output()
                    .unwrap();
                assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }

    fn drop_schema(&self) {
        if let Backend::Postgres { url, schema } = self {
            if std::env::var_os("JOBS_BENCH_KEEP").is_some() {
                println!("  (schema {schema} kept)");
                return;
            }
            let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
            let _ = std::process::Command::new("psql").args([url.as_str(), "-qc", &sql]).output();
        }
    }
}

/// Enqueues `n` no-op jobs in batches of 1,000; jobs per second.
async fn enqueue(client: &JobClient, n: u64, delay: Option<Duration>) -> f64 {
    let start = Instant::now();
    let mut left = n;
    while left > 0 {
        let batch = left.min(1000);
        let jobs = (0..batch).map(|i| client.job("noop", json!({"i": i}), JobOptions { delay, ..Default::default() }));
        client.enqueue_all(jobs.collect()).await.unwrap();
        left -= batch;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// The median time of one claim of 100 due jobs (one transaction, durable commit included), over
/// `rounds` claims: the median, because a busy machine's stray fsync stalls say nothing of the claim.
async fn claim_cost(store: &Arc<dyn Store>, client: &JobClient, rounds: u32) -> Duration {
    enqueue(client, u64::from(rounds) * 100, None).await;
    let mut times = Vec::new();
    for _ in 0..rounds {
        let p = ClaimDueSteps {
            instance: InstanceId::new("bench").unwrap(),
            limit: 100,
            agents: vec!["noop".into()],
            buckets: None,
            domains: vec![],
            limits: vec![],
        };
        let start = Instant::now();
        let got = store.claim_due_work(p).await.unwrap().steps;
        times.push(start.elapsed());
        assert_eq!(got.len(), 100);
    }
    times.sort();
    times[times.len() / 2]
}

#[tokio::main]
async fn main() {
    let a = args();
    let backend = match &a.pg {
        Some(url) => Backend::Postgres { url: url.clone(), schema: format!("jobs_bench_{}", std::process::id()) },
        None => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("bench.db");
            Backend::Sqlite { _dir: dir, path }
        }
    };
    let store = backend.open().await;
    let mut config = EngineConfig {
        roles: Roles { scheduler: true, supervisor: false, dispatcher: false },
        ..EngineConfig::default()
    };
    config.scheduler.concurrency = 256;
    let engine = Engine::builder(store.clone(), InstanceId::new("bench").unwrap())
        .agent("noop", Noop)
        .config(config)
        .build()
        .unwrap();
    let client = engine.jobs().clone();
    println!("retry jobs on {}, {} jobs, {} history records", backend.name(), a.jobs, a.history);

    let rate = enqueue(&client, a.jobs, None).await;
    println!("  enqueue   {rate:>9.0} jobs/s  (batches of 1,000, one transaction each)");
    let start = Instant::now();
    let running = engine.start();
    while engine.metrics().completed < a.jobs {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain = start.elapsed();
    running.shutdown().await;
    println!(
        "  run       {:>9.0} jobs/s  (a no-op handler, one scheduler, concurrency 256)",
        a.jobs as f64 / drain.as_secs_f64()
    );

    let empty = claim_cost(&store, &client, a.claims).await;
    println!("  claim of 100 (median) with an empty history: {:>8.2} ms", empty.as_secs_f64() * 1000.0);
    let fill = Instant::now();
    backend.fill_history(a.history);
    println!("  (history filled with {} jobs in {:.1} s)", a.history, fill.elapsed().as_secs_f64());
    let full = claim_cost(&store, &client, a.claims).await;
    println!(
        "  claim of 100 (median) with {} in history: {:>8.2} ms ({:+.0}%)",
        a.history,
        full.as_secs_f64() * 1000.0,
        (full.as_secs_f64() / empty.as_secs_f64() - 1.0) * 100.0
    );
    backend.drop_schema();
}
