//! The scheduler's claim (P14): due Pending steps become Processing under one instance's lease.
//! Agents with a concurrency or rate limit claim on their own, within what the limit leaves.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params};
use shiftboss_core::model::EventLevel;
use shiftboss_core::{LeaseToken, StepId, TaskId, Timestamp};
use shiftboss_store::{AgentLimit, ClaimDueSteps, ClaimedStep, StoreError, event_kind as ev};
use std::rc::Rc;

/// The width of a rate limit's window.
const RATE_WINDOW_MS: i64 = 1000;

pub fn claim_due_steps(t: &Tx<'_>, p: &ClaimDueSteps) -> Result<Vec<ClaimedStep>, StoreError> {
    if p.limit == 0 || p.agents.is_empty() || p.buckets.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let limit_of = |agent: &str| {
        p.limits.iter().find(|l| l.agent == agent && (l.max_concurrent.is_some() || l.per_second.is_some()))
    };
    let free: Vec<String> = p.agents.iter().filter(|a| limit_of(a).is_none()).cloned().collect();
    let mut claimed = Vec::new();
    if !free.is_empty() {
        claimed = claim_group(t, p, &free, p.limit)?;
    }
    for limit in p.agents.iter().filter_map(|a| limit_of(a)) {
        let room = p.limit.saturating_sub(claimed.len() as u32);
        if room == 0 {
            break;
        }
        let allowed = allowance(t, limit)?.min(room);
        if allowed == 0 {
            continue;
        }
        let got = claim_group(t, p, std::slice::from_ref(&limit.agent), allowed)?;
        if limit.per_second.is_some() {
            use_rate(t, &limit.agent, got.len() as i64)?;
        }
        claimed.extend(got);
    }
    for c in &claimed {
        // The fields in serde_json's order (by key), as every other event's detail.
        let detail = format!(
            r#"{{"attempt":{},"complete_by":{},"lease_token":{}}}"#,
            c.attempt, c.complete_by.0, c.lease_token.0
        );
        t.event_text(c.task_id, Some(c.id), ev::STEP_CLAIMED, EventLevel::Info, p.instance.as_str(), detail);
    }
    Ok(claimed)
}

fn claim_group(t: &Tx<'_>, p: &ClaimDueSteps, agents: &[String], limit: u32) -> Result<Vec<ClaimedStep>, StoreError> {
    let agents: Rc<Vec<Value>> = Rc::new(agents.iter().map(|a| Value::from(a.clone())).collect());
    let filtered = p.buckets.is_some();
    let buckets: Rc<Vec<Value>> = Rc::new(p.buckets.iter().flatten().map(|b| Value::from(i64::from(*b))).collect());
    let domains: Rc<Vec<Value>> = Rc::new(p.domains.iter().map(|d| Value::from(d.clone())).collect());
    // One statement picks and locks: inside the IMMEDIATE transaction no other writer runs, so no
    // other scheduler, in this process or another, can claim the same rows. With a response
    // timeout, complete-by starts at the first response window; heartbeats move it on. No
    // complete-by runs past the step's deadline (its total timeout).
    let mut st =
        t.tx.prepare_cached(
            "UPDATE steps SET state = 'processing', locked_by = ?1,
                    complete_by = min(?2 + min(timeout_ms, coalesce(response_timeout_ms, timeout_ms)),
                                      coalesce(deadline_at, ?2 + timeout_ms)), claimed_at = ?2,
                    lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?2
             WHERE id IN (SELECT id FROM steps
                          WHERE state = 'pending' AND due_at <= ?2 AND agent IN rarray(?3)
                                AND (?5 = 0 OR bucket IN rarray(?6))
                                AND (domain IS NULL OR domain IN rarray(?7) OR fallback_at <= ?2)
                          ORDER BY priority DESC, due_at, id LIMIT ?4)
             RETURNING id, task_id, name, agent, lease_token, complete_by, attempts, input, config, idempotency_key,
                       (SELECT t.task_key FROM tasks t WHERE t.id = steps.task_id), progress",
        )
        .map_err(map_err)?;
    let rows = st
        .query_map(params![p.instance.as_str(), t.now.0, agents, limit, filtered, buckets, domains], |r| {
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
                task_key: r.get(10)?,
                progress: crate::rows::opt_json(r, 11, "steps.progress")?,
            })
        })
        .map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

/// How many steps of an agent are running, from `steps_processing` (it leads with the agent).
pub(crate) const RUNNING_OF_AGENT: &str = "SELECT count(*) FROM steps WHERE state = 'processing' AND agent = ?1";

/// How many more steps of a limited agent may start now.
fn allowance(t: &Tx<'_>, limit: &AgentLimit) -> Result<u32, StoreError> {
    let mut room = u32::MAX;
    if let Some(max) = limit.max_concurrent {
        let running: u32 =
            t.tx.prepare_cached(RUNNING_OF_AGENT)
                .and_then(|mut st| st.query_row([&limit.agent], |r| r.get(0)))
                .map_err(map_err)?;
        room = room.min(max.saturating_sub(running));
    }
    if let Some(per_second) = limit.per_second {
        let window = t.now.0 - t.now.0.rem_euclid(RATE_WINDOW_MS);
        let used: Option<(i64, i64)> =
            t.tx.prepare_cached("SELECT window_start, used FROM agent_rates WHERE agent = ?1")
                .and_then(|mut st| st.query_row([&limit.agent], |r| Ok((r.get(0)?, r.get(1)?))).optional())
                .map_err(map_err)?;
        let used = match used {
            Some((start, used)) if start == window => used,
            _ => 0,
        };
        room = room.min(u32::try_from((i64::from(per_second) - used).max(0)).unwrap_or(0));
    }
    Ok(room)
}

fn use_rate(t: &Tx<'_>, agent: &str, n: i64) -> Result<(), StoreError> {
    let window = t.now.0 - t.now.0.rem_euclid(RATE_WINDOW_MS);
    t.tx.prepare_cached(
        "INSERT INTO agent_rates (agent, window_start, used) VALUES (?1, ?2, ?3)
         ON CONFLICT (agent) DO UPDATE SET
             used = CASE WHEN window_start = excluded.window_start THEN used + excluded.used ELSE excluded.used END,
             window_start = excluded.window_start",
    )
    .and_then(|mut st| st.execute(params![agent, window, n]))
    .map_err(map_err)?;
    Ok(())
}

/// A step heartbeat: complete-by moves to now plus the response timeout, never past the claim's
/// start plus the step's timeout nor the step's deadline (its total timeout), and never back.
pub fn extend_lease(t: &Tx<'_>, p: &shiftboss_store::ExtendLease) -> Result<Timestamp, StoreError> {
    let at: Option<i64> =
        t.tx.prepare_cached(
            "UPDATE steps SET complete_by = max(complete_by,
                     min(?3 + coalesce(response_timeout_ms, timeout_ms),
                         coalesce(claimed_at + timeout_ms, ?3 + timeout_ms),
                         coalesce(deadline_at, ?3 + timeout_ms))), updated_at = ?3,
                 progress = coalesce(?4, progress)
             WHERE id = ?1 AND lease_token = ?2 AND state = 'processing' AND kind = 'agent' RETURNING complete_by",
        )
        .and_then(|mut st| {
            let progress = p.progress.as_ref().map(|v| v.to_string());
            st.query_row(params![p.step_id.0, p.lease_token.0, t.now.0, progress], |r| r.get(0)).optional()
        })
        .map_err(map_err)?;
    at.map(Timestamp).ok_or_else(|| {
        StoreError::Conflict(format!(
            "step {}: lease {} is not held (lapsed, or claimed again)",
            p.step_id, p.lease_token
        ))
    })
}
