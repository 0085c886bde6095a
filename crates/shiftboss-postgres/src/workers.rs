//! The remote worker registry (issue 17), and the task keys a worker's claim carries. The same
//! rules as the SQLite store's `workers.rs`.

use crate::rows::get;
use crate::tx::{Conn, Tx};
use shiftboss_core::Timestamp;
use shiftboss_store::{AgentWorker, StoreError, WorkersSeen};

/// One statement for every pair: a report holds a worker's agent types, written together.
pub async fn record_seen(t: &Tx<'_>, p: &WorkersSeen) -> Result<(), StoreError> {
    let agents: Vec<&str> = p.seen.iter().map(|s| s.agent.as_str()).collect();
    let workers: Vec<&str> = p.seen.iter().map(|s| s.worker.as_str()).collect();
    // Two reports of one pair in one statement would be an error for ON CONFLICT: DISTINCT.
    t.execute(
        "INSERT INTO agent_workers (agent, worker, first_seen_at, last_seen_at)
         SELECT DISTINCT a, w, $3::BIGINT, $3::BIGINT FROM unnest($1::TEXT[], $2::TEXT[]) AS s(a, w)
         ON CONFLICT (agent, worker) DO UPDATE
             SET last_seen_at = greatest(agent_workers.last_seen_at, excluded.last_seen_at)",
        &[&agents, &workers, &t.now.0],
    )
    .await?;
    let forget = i64::try_from(p.forget_after.as_millis()).unwrap_or(i64::MAX);
    t.execute("DELETE FROM agent_workers WHERE last_seen_at < $1", &[&t.now.0.saturating_sub(forget)]).await?;
    Ok(())
}

pub async fn list(c: Conn<'_>) -> Result<Vec<AgentWorker>, StoreError> {
    let rows = c
        .query("SELECT agent, worker, first_seen_at, last_seen_at FROM agent_workers ORDER BY agent, worker", &[])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(AgentWorker {
                agent: get(r, 0)?,
                worker: get(r, 1)?,
                first_seen_at: Timestamp(get(r, 2)?),
                last_seen_at: Timestamp(get(r, 3)?),
            })
        })
        .collect()
}
