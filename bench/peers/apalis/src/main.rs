//! apalis 1.x as a benchmark peer: N no-op jobs pushed in bulk, then drained by one worker.
//! Prints one JSON line: {"peer":"apalis","db":...,"jobs":N,"drain_s":...,"jobs_per_s":...}.
//!
//! apalis-peer postgres://.../DB N SLOTS   (the database should be empty: apalis uses schema `apalis`)
//! apalis-peer sqlite:PATH N SLOTS
//!
//! SLOTS, the jobs in flight every system of the comparison runs with, sets apalis's two knobs for
//! it: the worker's concurrency limit (a tower layer) and the jobs fetched per poll (half of it, as
//! shiftboss claims).

use apalis::prelude::*;
use futures::stream::{self, StreamExt};
use std::time::{Duration, Instant};

/// Jobs pushed per INSERT.
const PUSH_CHUNK: usize = 5_000;

async fn noop(_job: u64) -> Result<(), BoxDynError> {
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (url, n, slots) = match args.as_slice() {
        [_, url, n, slots] => (url.clone(), n.parse::<u64>()?, slots.parse::<usize>()?.max(1)),
        _ => return Err("usage: apalis-peer DB_URL N SLOTS".into()),
    };
    let batch = (slots / 2).max(1);
    let (db, drain) = if url.starts_with("postgres") {
        ("postgres", pg(&url, n, slots, batch).await?)
    } else {
        ("sqlite", lite(&url, n, slots, batch).await?)
    };
    println!(
        "{}",
        serde_json::json!({"peer": "apalis", "db": db, "jobs": n, "drain_s": drain.as_secs_f64(),
                           "jobs_per_s": n as f64 / drain.as_secs_f64(),
                           "knob": format!("concurrency {slots} (a tower limit on the worker), batch_size {batch} per poll")})
    );
    Ok(())
}

async fn pg(url: &str, n: u64, slots: usize, batch: usize) -> Result<Duration, Box<dyn std::error::Error>> {
    use apalis_postgres::{Config, PostgresStorage};
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(10).connect(url).await?;
    PostgresStorage::<()>::setup(&pool).await?;
    let config = Config::default().queue("bench").batch_size(batch);
    let mut backend = PostgresStorage::<u64>::new(&pool).with_config(config);
    let mut i = 0;
    while i < n {
        let end = (i + PUSH_CHUNK as u64).min(n);
        let mut items = stream::iter(i..end).map(|j| TaskBuilder::new(j).build());
        backend.push_all(&mut items).await?;
        i = end;
    }
    let t0 = Instant::now();
    let counter = pool.clone();
    let worker = WorkerBuilder::new("bench-pg").backend(backend).concurrency(slots).parallelize(|f| tokio::spawn(f)).build(noop);
    // The worker runs until the drain is seen to end; select! keeps it on this task.
    tokio::select! {
        r = worker.run() => return Err(format!("the apalis worker stopped: {r:?}").into()),
        r = wait_done(|| async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM apalis.jobs WHERE status = 'Done'")
            .fetch_one(&counter)
            .await
    }, n) => r?,
    }
    Ok(t0.elapsed())
}

async fn lite(url: &str, n: u64, slots: usize, batch: usize) -> Result<Duration, Box<dyn std::error::Error>> {
    use apalis_sqlite::{Config, SqliteStorage};
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
    use std::str::FromStr;
    let opts = SqliteConnectOptions::from_str(url)?.create_if_missing(true).journal_mode(SqliteJournalMode::Wal);
    // apalis's setup turns `synchronous` OFF on the connection it runs on: not a durable commit.
    // Migrate on a throwaway pool, then run on one whose every connection commits with FULL, as
    // shiftboss's SQLite store does by default.
    let setup = SqlitePoolOptions::new().max_connections(1).connect_with(opts.clone()).await?;
    SqliteStorage::<()>::setup(&setup).await?;
    setup.close().await;
    let pool = SqlitePoolOptions::new().connect_with(opts.synchronous(SqliteSynchronous::Full)).await?;
    let config = Config::default().queue("bench").batch_size(batch);
    let mut backend = SqliteStorage::<u64>::new(&pool).with_config(config);
    let mut i = 0;
    while i < n {
        let end = (i + PUSH_CHUNK as u64).min(n);
        let mut items = stream::iter(i..end).map(|j| TaskBuilder::new(j).build());
        backend.push_all(&mut items).await?;
        i = end;
    }
    let t0 = Instant::now();
    let counter = pool.clone();
    let worker = WorkerBuilder::new("bench-sqlite").backend(backend).concurrency(slots).parallelize(|f| tokio::spawn(f)).build(noop);
    // The worker runs until the drain is seen to end; select! keeps it on this task.
    tokio::select! {
        r = worker.run() => return Err(format!("the apalis worker stopped: {r:?}").into()),
        r = wait_done(|| async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM Jobs WHERE status = 'Done'").fetch_one(&counter).await
    }, n) => r?,
    }
    Ok(t0.elapsed())
}

/// Polls the done count every 100 ms: the drain ends when every completion is committed. Not more
/// often: each poll is a `count(*)` over the jobs table, and on SQLite it runs in the worker's process.
async fn wait_done<F, Fut>(count: F, n: u64) -> Result<(), Box<dyn std::error::Error>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<i64, sqlx::Error>>,
{
    let give_up = Instant::now() + Duration::from_secs(1800);
    while (count().await? as u64) < n {
        if Instant::now() > give_up {
            return Err("apalis did not drain within 30 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
