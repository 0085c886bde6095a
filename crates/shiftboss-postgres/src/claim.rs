//! The scheduler's claim (P14): due Pending steps become Processing under one instance's lease.
//!
//! One statement picks, locks, updates and records. `picked` locks the rows it picks with
//! FOR UPDATE SKIP LOCKED, so concurrent claimers (in this process or another) each take other
//! rows instead of queueing behind one another, and a row changed since the statement's snapshot is
//! re-checked against `state = 'pending'` before it is locked. Claims take no task lock: they
//! touch no other step of the task and run no decider.
//!
//! `picked` is a MATERIALIZED CTE, not `UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP
//! LOCKED)`: the planner may run that subquery as the inner side of a nested-loop semi join, once per
//! outer row, and each rerun skips the rows this statement has just updated and returns the next
//! ones, so one claim takes more than `n` steps. A materialized CTE runs once.

use crate::rows::{get, json};
use crate::tx::Tx;
use shiftboss_core::{LeaseToken, StepId, TaskId, Timestamp};
use shiftboss_store::{ClaimDueSteps, ClaimedStep, StoreError, event_kind as ev};

const CLAIM: &str = "
WITH picked AS MATERIALIZED (
    SELECT id FROM steps
     WHERE state = 'pending' AND due_at <= $2 AND agent = ANY($3)
       AND ($6::int[] IS NULL OR bucket = ANY($6))
     ORDER BY priority DESC, due_at, id
     LIMIT $4
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE steps s SET state = 'processing', locked_by = $1, complete_by = $2 + s.timeout_ms,
           lease_token = s.lease_token + 1, attempts = s.attempts + 1, updated_at = $2
      FROM picked
     WHERE s.id = picked.id AND s.state = 'pending'
    RETURNING s.id, s.task_id, s.name, s.agent, s.lease_token, s.complete_by, s.attempts, s.input, s.config,
              s.idempotency_key
), recorded AS (
    INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
    SELECT task_id, id, $2, $5, 'info', $1,
           json_build_object('lease_token', lease_token, 'complete_by', complete_by, 'attempt', attempts)::text
      FROM claimed
     ORDER BY id
)
SELECT id, task_id, name, agent, lease_token, complete_by, attempts, input, config, idempotency_key FROM claimed";

pub async fn claim_due_steps(t: &Tx<'_>, p: &ClaimDueSteps) -> Result<Vec<ClaimedStep>, StoreError> {
    if p.limit == 0 || p.agents.is_empty() {
        return Ok(Vec::new());
    }
    if p.buckets.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let buckets: Option<Vec<i32>> = p.buckets.as_ref().map(|b| b.iter().map(|&x| i32::from(x)).collect());
    let rows = t
        .query(CLAIM, &[&p.instance.as_str(), &t.now.0, &p.agents, &i64::from(p.limit), &ev::STEP_CLAIMED, &buckets])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ClaimedStep {
                id: StepId(get(r, 0)?),
                task_id: TaskId(get(r, 1)?),
                name: get(r, 2)?,
                agent: get(r, 3)?,
                lease_token: LeaseToken(get(r, 4)?),
                complete_by: Timestamp(get(r, 5)?),
                claimed_at: t.now,
                attempt: crate::rows::count(r, 6, "steps.attempts")?,
                input: json(r, 7, "steps.input")?,
                config: json(r, 8, "steps.config")?,
                idempotency_key: get(r, 9)?,
            })
        })
        .collect()
}
