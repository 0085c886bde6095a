//! The raw limit of SQLite on this disk: one-row UPDATE transactions per second, one connection,
//! WAL mode, at `synchronous` NORMAL or FULL. Written in Rust on rusqlite (the store's own driver),
//! so the figure carries no interpreter overhead. `--db` names a scratch file; it is overwritten.

use super::{BenchError, stats::round3};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use shiftboss::target::DbTarget;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Sync {
    Normal,
    Full,
}

#[derive(Debug, Args)]
pub struct SqliteCommitsArgs {
    #[arg(long, value_enum)]
    synchronous: Sync,
    #[arg(long = "for", default_value = "5s", value_parser = humantime::parse_duration)]
    duration: Duration,
}

pub async fn run(db: &DbTarget, a: SqliteCommitsArgs) -> anyhow::Result<Value> {
    let DbTarget::Sqlite(path) = db else { return Err(BenchError::WrongStore("SQLite").into()) };
    let path = path.clone();
    let sync = match a.synchronous {
        Sync::Normal => "NORMAL",
        Sync::Full => "FULL",
    };
    let commits = tokio::task::spawn_blocking(move || -> anyhow::Result<u64> {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let conn = rusqlite::Connection::open(&path)?;
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {sync};
             CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
             INSERT INTO counter VALUES (1, 0);"
        ))?;
        let mut update = conn.prepare("UPDATE counter SET n = n + 1 WHERE id = 1")?;
        let end = Instant::now() + a.duration;
        let mut n = 0u64;
        // Each statement outside BEGIN is its own transaction: one commit per UPDATE.
        while Instant::now() < end {
            update.execute([])?;
            n += 1;
        }
        Ok(n)
    })
    .await??;
    let secs = a.duration.as_secs_f64();
    Ok(json!({
        "workload": "sqlite_commits", "store": "sqlite", "synchronous": sync.to_lowercase(),
        "commits": commits, "commits_per_s": round3(commits as f64 / secs),
    }))
}
