//! Putting tasks in the store for the workflow workloads: [`batches`], through the store's batch
//! submission (what `Engine::submit_many` writes with). It was `submit_task_in`, many submissions
//! per caller's transaction, at about 1,000 tasks/s on PostgreSQL: a `bench flow` of 10,000 orders
//! spent 10 s enqueueing for a drain of 3. (The throughput workload enqueues real retry jobs
//! through the engine instead.)

use shiftboss_store::{Store, SubmitTask};
use std::sync::Arc;

/// Tasks per batch of [`batches`].
const BATCH: usize = 500;

/// Submits every task through the store's batch submission (`submit_tasks`: one transaction and
/// multi-row writes per batch of 500), as many batches at once as the store writes concurrently,
/// committed before it returns.
pub async fn batches(store: &Arc<dyn Store>, tasks: Vec<SubmitTask>) -> anyhow::Result<()> {
    let writers = store.concurrent_writes().max(1);
    let chunks: Vec<Vec<SubmitTask>> = tasks.chunks(BATCH).map(<[SubmitTask]>::to_vec).collect();
    let mut pending = chunks.into_iter();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < writers {
            let Some(chunk) = pending.next() else { break };
            let store = store.clone();
            running.spawn(async move { store.submit_tasks(chunk).await });
        }
        match running.join_next().await {
            Some(r) => _ = r??,
            None => return Ok(()),
        }
    }
}

/// Enqueues one job through the store's own submit (its own transaction, committed on return).
pub async fn one(store: &dyn Store, job: SubmitTask) -> anyhow::Result<()> {
    store.submit_task(job).await?;
    Ok(())
}
