//! Lapsed leases (P6, P17): the supervisor's sweep, and a restarted scheduler's release of what it held.

use crate::advance::advance_task;
use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::params;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::{RetryDecision, RetryPolicies, RetryPolicy};
use shiftboss_core::state::StepEvent;
use shiftboss_core::{StepId, StepState, TaskId};
use shiftboss_store::{ExpiryReport, LeaderTerm, StoreError, event_kind as ev};

struct Held {
    id: StepId,
    task_id: TaskId,
    agent: String,
    failure_count: u32,
    lease_token: i64,
    locked_by: Option<String>,
    retry: Option<RetryPolicy>,
}

/// Why a held step is being taken back.
#[derive(Clone, Copy)]
pub enum Lapse {
    /// Its complete-by passed: retry after the policy's delay.
    Expired,
    /// Its holder restarted: retry at once.
    Released,
}

const HELD_COLUMNS: &str = "id, task_id, agent, failure_count, lease_token, locked_by, retry";

fn read_held(r: &rusqlite::Row<'_>) -> rusqlite::Result<Held> {
    let retry = crate::rows::retry_policy(r, 6)?;
    Ok(Held {
        id: StepId(r.get(0)?),
        task_id: TaskId(r.get(1)?),
        agent: r.get(2)?,
        failure_count: r.get(3)?,
        lease_token: r.get(4)?,
        locked_by: r.get(5)?,
        retry,
    })
}

pub fn check_leader(t: &Tx<'_>, leader: &LeaderTerm) -> Result<(), StoreError> {
    let live: i64 =
        t.tx.query_row(
            "SELECT count(*) FROM leaders WHERE name = ?1 AND holder = ?2 AND term = ?3 AND expires_at > ?4",
            params![leader.name, leader.holder.as_str(), leader.term, t.now.0],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    if live == 1 { Ok(()) } else { Err(StoreError::NotLeader(leader.name.clone())) }
}

pub fn expire_leases(
    t: &Tx<'_>,
    leader: &LeaderTerm,
    limit: u32,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    check_leader(t, leader)?;
    let sql = format!(
        "SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND complete_by <= ?1 ORDER BY complete_by LIMIT ?2"
    );
    let held = select_held(t, &sql, params![t.now.0, limit])?;
    let actor = format!("supervisor:{}", leader.holder);
    take_back(t, held, policies, Lapse::Expired, &actor)
}

pub fn release_instance_claims(
    t: &Tx<'_>,
    instance: &str,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    let sql = format!("SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND locked_by = ?1");
    let held = select_held(t, &sql, params![instance])?;
    take_back(t, held, policies, Lapse::Released, instance)
}

fn select_held(t: &Tx<'_>, sql: &str, p: impl rusqlite::Params) -> Result<Vec<Held>, StoreError> {
    let mut st = t.tx.prepare_cached(sql).map_err(map_err)?;
    let rows = st.query_map(p, read_held).map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

fn take_back(
    t: &Tx<'_>,
    held: Vec<Held>,
    policies: &RetryPolicies,
    lapse: Lapse,
    actor: &str,
) -> Result<ExpiryReport, StoreError> {
    let mut report = ExpiryReport::default();
    for h in held {
        let failures = h.failure_count + 1;
        let policy = policies.resolve(&h.agent, h.retry.as_ref());
        let decision = policy.after_failure(failures, fastrand::f64());
        let give_up = decision == RetryDecision::GiveUp;
        let next =
            StepState::Processing.on(StepEvent::Expire { give_up }).expect("a processing step can always expire");
        let due = match (decision, lapse) {
            (RetryDecision::RetryAfter(d), Lapse::Expired) => t.now.plus(d),
            _ => t.now,
        };
        let why = match lapse {
            Lapse::Expired => {
                format!("lease expired: no reply by complete-by (held by {})", h.locked_by.as_deref().unwrap_or("?"))
            }
            Lapse::Released => {
                format!("its scheduler {} restarted while holding it", h.locked_by.as_deref().unwrap_or("?"))
            }
        };
        let changed =
            t.tx.prepare_cached(
                "UPDATE steps SET state = ?3, failure_count = ?4, due_at = ?5, last_error = ?6,
                        locked_by = NULL, complete_by = NULL, updated_at = ?7
                 WHERE id = ?1 AND lease_token = ?2 AND state = 'processing'",
            )
            .and_then(|mut st| st.execute(params![h.id.0, h.lease_token, next.as_str(), failures, due.0, why, t.now.0]))
            .map_err(map_err)?;
        if changed != 1 {
            continue;
        }
        let kind = match lapse {
            Lapse::Expired => ev::STEP_EXPIRED,
            Lapse::Released => ev::STEP_RELEASED,
        };
        let detail = json!({"failure_count": failures, "lease_token": h.lease_token, "held_by": h.locked_by, "retry_at": (!give_up).then_some(due.0)});
        t.event(h.task_id, Some(h.id), kind, EventLevel::Info, actor, detail)?;
        if give_up {
            report.gave_up += 1;
            t.event(
                h.task_id,
                Some(h.id),
                ev::STEP_ERROR,
                EventLevel::Alert,
                actor,
                json!({"reason": "retry policy exhausted", "failure_count": failures, "error": why}),
            )?;
            advance_task(t, h.task_id, actor)?;
        } else {
            report.retried += 1;
        }
    }
    Ok(report)
}
