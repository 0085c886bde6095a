//! Putting tasks in the store for the workflow workloads. Bulk enqueue uses each store's
//! `submit_task_in`, many submissions per transaction, because the workloads time the drain, not
//! the enqueue. (The throughput workload enqueues real retry jobs through the engine instead.)

use anyhow::Context;
use shiftboss::target::{DbTarget, split_schema};
use shiftboss_store::{Store, SubmitTask};

/// Submissions per transaction.
const CHUNK: usize = 2_000;
/// PostgreSQL connections that enqueue side by side.
const PG_WRITERS: usize = 4;

/// Enqueues every job, committed, before it returns. The store must be migrated already.
pub async fn bulk(db: &DbTarget, jobs: Vec<SubmitTask>) -> anyhow::Result<()> {
    match db {
        DbTarget::Sqlite(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
                let mut conn = rusqlite::Connection::open(&path)?;
                conn.busy_timeout(std::time::Duration::from_secs(30))?;
                for chunk in jobs.chunks(CHUNK) {
                    let tx = conn.transaction()?;
                    for j in chunk {
                        shiftboss_sqlite::submit_task_in(&tx, j)?;
                    }
                    tx.commit()?;
                }
                Ok(())
            })
            .await?
        }
        DbTarget::Postgres(url) => {
            let (url, schema) = split_schema(url)?;
            let per = jobs.len().div_ceil(PG_WRITERS).max(1);
            let mut writers = tokio::task::JoinSet::new();
            for part in jobs.chunks(per).map(<[SubmitTask]>::to_vec) {
                let (url, schema) = (url.clone(), schema.clone());
                writers.spawn(async move { pg_writer(&url, &schema, part).await });
            }
            while let Some(r) = writers.join_next().await {
                r??;
            }
            Ok(())
        }
    }
}

async fn pg_writer(url: &str, schema: &str, jobs: Vec<SubmitTask>) -> anyhow::Result<()> {
    let (mut client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.context("connecting")?;
    tokio::spawn(conn);
    for chunk in jobs.chunks(CHUNK) {
        let tx = client.transaction().await?;
        for j in chunk {
            shiftboss_postgres::submit_task_in(&tx, schema, j).await?;
        }
        tx.commit().await?;
    }
    Ok(())
}

/// Enqueues one job through the store's own submit (its own transaction, committed on return).
pub async fn one(store: &dyn Store, job: SubmitTask) -> anyhow::Result<()> {
    store.submit_task(job).await?;
    Ok(())
}
