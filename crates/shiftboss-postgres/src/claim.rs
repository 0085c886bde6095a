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
//!
//! Agents with a concurrency or rate limit are claimed on their own, within what the limit leaves
//! (see `limits`).

use crate::limits::{Allowances, lock_limited};
use crate::rows::{get, json};
use crate::tx::Tx;
use shiftboss_core::{LeaseToken, StepId, TaskId, Timestamp};
use shiftboss_store::{AgentLimit, ClaimDueSteps, ClaimedStep, ExtendLease, StoreError, event_kind as ev};

/// With a response timeout, complete-by starts at the first response window; heartbeats move it
/// on (see [`extend_lease`]). A step routed to a domain is claimed only by an instance serving it,
/// until its fallback time.
const CLAIM: &str = "
WITH picked AS MATERIALIZED (
    SELECT id FROM steps
     WHERE state = 'pending' AND due_at <= $2 AND agent = ANY($3)
       AND ($6::int[] IS NULL OR bucket = ANY($6))
       AND (domain IS NULL OR domain = ANY($7) OR fallback_at <= $2)
     ORDER BY priority DESC, due_at, id
     LIMIT $4
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE steps s SET state = 'processing', locked_by = $1,
           complete_by = $2 + least(s.timeout_ms, coalesce(s.response_timeout_ms, s.timeout_ms)), claimed_at = $2,
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
    if p.limit == 0 || p.agents.is_empty() || p.buckets.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let limit_of = |agent: &str| -> Option<&AgentLimit> {
        p.limits.iter().find(|l| l.agent == agent && (l.max_concurrent.is_some() || l.per_second.is_some()))
    };
    let free: Vec<String> = p.agents.iter().filter(|a| limit_of(a).is_none()).cloned().collect();
    let mut claimed = Vec::new();
    if !free.is_empty() {
        claimed = claim_group(t, p, &free, p.limit).await?;
    }
    let limited: Vec<&AgentLimit> = p.agents.iter().filter_map(|a| limit_of(a)).collect();
    if limited.is_empty() {
        return Ok(claimed);
    }
    let mut allowances: Allowances = lock_limited(t, &limited).await?;
    for limit in limited {
        let room = p.limit.saturating_sub(claimed.len() as u32);
        if room == 0 {
            break;
        }
        let allowed = allowances.room(t, limit).await?.min(room);
        if allowed == 0 {
            continue;
        }
        let got = claim_group(t, p, std::slice::from_ref(&limit.agent), allowed).await?;
        allowances.used(t, limit, got.len() as u32).await?;
        claimed.extend(got);
    }
    Ok(claimed)
}

async fn claim_group(
    t: &Tx<'_>,
    p: &ClaimDueSteps,
    agents: &[String],
    limit: u32,
) -> Result<Vec<ClaimedStep>, StoreError> {
    let buckets: Option<Vec<i32>> = p.buckets.as_ref().map(|b| b.iter().map(|&x| i32::from(x)).collect());
    let rows = t
        .query(
            CLAIM,
            &[&p.instance.as_str(), &t.now.0, &agents, &i64::from(limit), &ev::STEP_CLAIMED, &buckets, &p.domains],
        )
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

/// A step heartbeat: complete-by moves to now plus the response timeout, never past the claim's
/// start plus the step's timeout, and never back. Fenced by the lease token like a reply; it needs
/// no task lock, as it changes no state and runs no decider.
pub async fn extend_lease(t: &Tx<'_>, p: &ExtendLease) -> Result<Timestamp, StoreError> {
    let row = t
        .query_opt(
            "UPDATE steps SET complete_by = greatest(complete_by,
                     least($3 + coalesce(response_timeout_ms, timeout_ms), claimed_at + timeout_ms)), updated_at = $3
             WHERE id = $1 AND lease_token = $2 AND state = 'processing' AND kind = 'agent' RETURNING complete_by",
            &[&p.step_id.0, &p.lease_token.0, &t.now.0],
        )
        .await?;
    match row {
        Some(r) => Ok(Timestamp(get(&r, 0)?)),
        None => Err(StoreError::Conflict(format!(
            "step {}: lease {} is not held (lapsed, or claimed again)",
            p.step_id, p.lease_token
        ))),
    }
}
