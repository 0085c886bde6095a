//! The scheduler's claim (P14): due Pending steps become Processing under one instance's lease.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::types::Value;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::{LeaseToken, StepId, TaskId, Timestamp};
use shiftboss_store::{ClaimDueSteps, ClaimedStep, StoreError, event_kind as ev};
use std::rc::Rc;

pub fn claim_due_steps(t: &Tx<'_>, p: &ClaimDueSteps) -> Result<Vec<ClaimedStep>, StoreError> {
    if p.limit == 0 || p.agents.is_empty() {
        return Ok(Vec::new());
    }
    let agents: Rc<Vec<Value>> = Rc::new(p.agents.iter().map(|a| Value::from(a.clone())).collect());
    let filtered = p.buckets.is_some();
    if p.buckets.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let buckets: Rc<Vec<Value>> = Rc::new(p.buckets.iter().flatten().map(|b| Value::from(i64::from(*b))).collect());
    // One statement picks and locks: inside the IMMEDIATE transaction no other writer runs, so no
    // other scheduler, in this process or another, can claim the same rows.
    let mut st =
        t.tx.prepare_cached(
            "UPDATE steps SET state = 'processing', locked_by = ?1, complete_by = ?2 + timeout_ms,
                    lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?2
             WHERE id IN (SELECT id FROM steps
                          WHERE state = 'pending' AND due_at <= ?2 AND agent IN rarray(?3)
                                AND (?5 = 0 OR bucket IN rarray(?6))
                          ORDER BY priority DESC, due_at, id LIMIT ?4)
             RETURNING id, task_id, name, agent, lease_token, complete_by, attempts, input, config, idempotency_key",
        )
        .map_err(map_err)?;
    let rows = st
        .query_map(rusqlite::params![p.instance.as_str(), t.now.0, agents, p.limit, filtered, buckets], |r| {
            Ok(ClaimedStep {
                id: StepId(r.get(0)?),
                task_id: TaskId(r.get(1)?),
                name: r.get(2)?,
                agent: r.get(3)?,
                lease_token: LeaseToken(r.get(4)?),
                complete_by: Timestamp(r.get(5)?),
                claimed_at: t.now,
                attempt: r.get(6)?,
                input: crate::rows::json(r, 7, "steps.input")?,
                config: crate::rows::json(r, 8, "steps.config")?,
                idempotency_key: r.get(9)?,
            })
        })
        .map_err(map_err)?;
    let claimed: Vec<ClaimedStep> = rows.collect::<Result<_, _>>().map_err(map_err)?;
    for c in &claimed {
        t.event(
            c.task_id,
            Some(c.id),
            ev::STEP_CLAIMED,
            EventLevel::Info,
            p.instance.as_str(),
            json!({"lease_token": c.lease_token.0, "complete_by": c.complete_by.0, "attempt": c.attempt}),
        )?;
    }
    Ok(claimed)
}
