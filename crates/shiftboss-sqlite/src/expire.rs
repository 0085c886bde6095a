//! Lapsed leases (P6, P17): the supervisor's sweep, and a restarted scheduler's release of what it held.

use crate::advance::advance_task;
use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::params;
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepId, TaskId};
use shiftboss_store::lapse::{self, Lapse, LapsedStep};
use shiftboss_store::{ExpiryReport, LeaderTerm, StoreError, event_kind as ev};

struct Held {
    id: StepId,
    task_id: TaskId,
    agent: String,
    failure_count: u32,
    lease_token: i64,
    locked_by: Option<String>,
    retry: Option<RetryPolicy>,
    on_timeout: OnTimeout,
}

const HELD_COLUMNS: &str = "id, task_id, agent, failure_count, lease_token, locked_by, retry, on_timeout";

/// An `alert_only` step whose complete-by passed keeps its holder, with no deadline left: the
/// supervisor never takes it back, and an operator decides.
const NO_DEADLINE: i64 = i64::MAX;

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
        on_timeout: OnTimeout::parse(&r.get::<_, String>(7)?).unwrap_or_default(),
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

/// Processing steps past their complete-by, earliest first. `steps_processing` holds the
/// processing steps only, complete-by included, so the scan reads rows only for lapsed ones.
pub(crate) fn expired_sql() -> String {
    format!(
        "SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND complete_by <= ?1 ORDER BY complete_by LIMIT ?2"
    )
}

pub fn expire_leases(
    t: &Tx<'_>,
    leader: &LeaderTerm,
    limit: u32,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    check_leader(t, leader)?;
    let held = select_held(t, &expired_sql(), params![t.now.0, limit])?;
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
        if lapse == Lapse::Expired && h.on_timeout == OnTimeout::AlertOnly {
            let changed =
                t.tx.execute(
                    "UPDATE steps SET complete_by = ?3, updated_at = ?4
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'processing'",
                    params![h.id.0, h.lease_token, NO_DEADLINE, t.now.0],
                )
                .map_err(map_err)?;
            if changed == 1 {
                let detail = serde_json::json!({"held_by": h.locked_by, "lease_token": h.lease_token});
                t.event(h.task_id, Some(h.id), ev::STEP_OVERDUE, EventLevel::Alert, actor, detail)?;
            }
            continue;
        }
        let step = LapsedStep {
            agent: &h.agent,
            failure_count: h.failure_count,
            retry: h.retry.as_ref(),
            locked_by: h.locked_by.as_deref(),
            lease_token: h.lease_token,
            on_timeout: h.on_timeout,
        };
        let plan = lapse::plan(step, lapse, t.now, policies, fastrand::f64());
        let gave_up = plan.alert.is_some();
        if !write_plan(t, h.id, h.task_id, h.lease_token, plan, actor)? {
            continue;
        }
        if gave_up {
            report.gave_up += 1;
            advance_task(t, h.task_id, actor)?;
        } else {
            report.retried += 1;
        }
    }
    Ok(report)
}

/// Writes what becomes of a held step (a lapse, or a failure its agent reported), fenced by the
/// lease token, with its events; false when the step had moved on. The caller moves the task on.
pub fn write_plan(
    t: &Tx<'_>,
    id: StepId,
    task_id: TaskId,
    lease_token: i64,
    plan: lapse::LapsePlan,
    actor: &str,
) -> Result<bool, StoreError> {
    let changed =
        t.tx.prepare_cached(
            "UPDATE steps SET state = ?3, failure_count = ?4, last_error = ?6,
                    locked_by = NULL, complete_by = NULL, updated_at = ?7,
                    -- A paused task's step waits for the resume, like its other pending steps.
                    due_at = CASE WHEN (SELECT state FROM tasks WHERE id = steps.task_id) = 'paused'
                                  THEN 9223372036854775807 ELSE ?5 END
             WHERE id = ?1 AND lease_token = ?2 AND state = 'processing'",
        )
        .and_then(|mut st| {
            st.execute(params![
                id.0,
                lease_token,
                plan.next.as_str(),
                plan.failure_count,
                plan.due_at.0,
                crate::replies::truncate(&plan.why),
                t.now.0
            ])
        })
        .map_err(map_err)?;
    if changed != 1 {
        return Ok(false);
    }
    t.event(task_id, Some(id), plan.kind, EventLevel::Info, actor, plan.detail)?;
    if let Some(alert) = plan.alert {
        t.event(task_id, Some(id), ev::STEP_ERROR, EventLevel::Alert, actor, alert)?;
    }
    Ok(true)
}
