//! The remote worker registry (issue 17), and the task keys a worker's claim carries.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{Connection, params};
use shiftboss_core::Timestamp;
use shiftboss_store::{AgentWorker, StoreError, WorkersSeen};

pub fn record_seen(t: &Tx<'_>, p: &WorkersSeen) -> Result<(), StoreError> {
    let mut upsert =
        t.tx.prepare_cached(
            "INSERT INTO agent_workers (agent, worker, first_seen_at, last_seen_at) VALUES (?1, ?2, ?3, ?3)
             ON CONFLICT (agent, worker) DO UPDATE SET last_seen_at = max(last_seen_at, excluded.last_seen_at)",
        )
        .map_err(map_err)?;
    for s in &p.seen {
        upsert.execute(params![s.agent, s.worker, t.now.0]).map_err(map_err)?;
    }
    let forget = i64::try_from(p.forget_after.as_millis()).unwrap_or(i64::MAX);
    t.tx.prepare_cached("DELETE FROM agent_workers WHERE last_seen_at < ?1")
        .and_then(|mut st| st.execute([t.now.0.saturating_sub(forget)]))
        .map_err(map_err)?;
    Ok(())
}

pub fn list(c: &Connection) -> Result<Vec<AgentWorker>, StoreError> {
    let mut st = c
        .prepare_cached("SELECT agent, worker, first_seen_at, last_seen_at FROM agent_workers ORDER BY agent, worker")
        .map_err(map_err)?;
    let rows = st
        .query_map([], |r| {
            Ok(AgentWorker {
                agent: r.get(0)?,
                worker: r.get(1)?,
                first_seen_at: Timestamp(r.get(2)?),
                last_seen_at: Timestamp(r.get(3)?),
            })
        })
        .map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}
