//! Lapsed leases (P6, P17): the supervisor's sweep, and a restarted scheduler's release of what it held.
//!
//! The held steps are read without locks, then their tasks are locked (ascending ids, see
//! `lock_tasks`), then each step is taken back by an UPDATE fenced by the lease token it was read
//! with and `state = 'processing'`. A step that a reply, a cancel or another sweep moved in the
//! meantime fails the fence and is skipped: each expiry is counted once. Steps are never locked
//! before their task, so a sweep and a batch of replies cannot deadlock.
//!
//! A step whose policy is `alert_only` is not taken back when its complete-by passes: it keeps its
//! holder, with no deadline left, and an alert says so.

use crate::advance::advance_task;
use crate::error::bad_column;
use crate::lock::lock_tasks;
use crate::rows::{count, get, retry_policy};
use crate::tx::Tx;
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepId, StepState, TaskId};
use shiftboss_store::lapse::{self, Lapse, LapsedStep};
use shiftboss_store::{ExpiryReport, LeaderTerm, StoreError, event_kind as ev};
use tokio_postgres::Row;

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

fn read_held(r: &Row) -> Result<Held, StoreError> {
    Ok(Held {
        id: StepId(get(r, 0)?),
        task_id: TaskId(get(r, 1)?),
        agent: get(r, 2)?,
        failure_count: count(r, 3, "steps.failure_count")?,
        lease_token: get(r, 4)?,
        locked_by: get(r, 5)?,
        retry: retry_policy(r, 6)?,
        on_timeout: parsed_on_timeout(get(r, 7)?)?,
    })
}

fn parsed_on_timeout(text: &str) -> Result<OnTimeout, StoreError> {
    OnTimeout::parse(text).ok_or_else(|| bad_column("steps.on_timeout", format!("unknown policy {text:?}")))
}

/// Refuses a leader-only write unless `leader`'s term is live by the store's clock.
///
/// FOR SHARE keeps the lease row as it is until this transaction ends: another instance cannot be
/// elected (a new term written) while the sweep runs, so the whole sweep is fenced by the term,
/// not only its first statement. If an election is committing, this waits for it and then sees
/// the new term.
pub async fn check_leader(t: &Tx<'_>, leader: &LeaderTerm) -> Result<(), StoreError> {
    let live = t
        .query_opt(
            "SELECT 1 FROM leaders WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at > $4 FOR SHARE",
            &[&leader.name, &leader.holder.as_str(), &leader.term, &t.now.0],
        )
        .await?;
    if live.is_some() { Ok(()) } else { Err(StoreError::NotLeader(leader.name.clone())) }
}

pub async fn expire_leases(
    t: &Tx<'_>,
    leader: &LeaderTerm,
    limit: u32,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    check_leader(t, leader).await?;
    let sql = format!(
        "SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND complete_by <= $1 ORDER BY complete_by LIMIT $2"
    );
    let rows = t.query(&sql, &[&t.now.0, &i64::from(limit)]).await?;
    let held = rows.iter().map(read_held).collect::<Result<Vec<_>, _>>()?;
    let actor = format!("supervisor:{}", leader.holder);
    take_back(t, held, policies, Lapse::Expired, &actor).await
}

pub async fn release_instance_claims(
    t: &Tx<'_>,
    instance: &str,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    let sql = format!("SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND locked_by = $1 ORDER BY id");
    let rows = t.query(&sql, &[&instance]).await?;
    let held = rows.iter().map(read_held).collect::<Result<Vec<_>, _>>()?;
    take_back(t, held, policies, Lapse::Released, instance).await
}

async fn take_back(
    t: &Tx<'_>,
    held: Vec<Held>,
    policies: &RetryPolicies,
    lapse: Lapse,
    actor: &str,
) -> Result<ExpiryReport, StoreError> {
    lock_tasks(t, &held.iter().map(|h| h.task_id).collect::<Vec<_>>()).await?;
    let mut report = ExpiryReport::default();
    for h in held {
        if lapse == Lapse::Expired && h.on_timeout == OnTimeout::AlertOnly {
            overdue(t, &h, actor).await?;
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
        if !write_plan(t, h.id, h.task_id, h.lease_token, plan, actor).await? {
            continue;
        }
        if gave_up {
            report.gave_up += 1;
            advance_task(t, h.task_id, actor).await?;
        } else {
            report.retried += 1;
        }
    }
    Ok(report)
}

/// Writes what becomes of a held step (a lapse, or a failure its agent reported), fenced by the
/// lease token and `state = 'processing'`, with its events; false when the step had moved on. The
/// caller holds the task's lock, and moves the task on.
pub async fn write_plan(
    t: &Tx<'_>,
    id: StepId,
    task_id: TaskId,
    lease_token: i64,
    plan: lapse::LapsePlan,
    actor: &str,
) -> Result<bool, StoreError> {
    let changed = t
        .execute(
            // A paused task's steps wait, as its other pending steps do, until it resumes.
            "UPDATE steps SET state = $3, failure_count = $4, last_error = $6,
                    due_at = CASE WHEN (SELECT state FROM tasks WHERE id = steps.task_id) = 'paused'
                                  THEN $8::bigint ELSE $5::bigint END,
                    locked_by = NULL, complete_by = NULL, updated_at = $7
             WHERE id = $1 AND lease_token = $2 AND state = 'processing'",
            &[
                &id.0,
                &lease_token,
                &plan.next.as_str(),
                &crate::tx::pg_int(plan.failure_count)?,
                &plan.due_at.0,
                // An agent's reason may be long, or hold a NUL (which PostgreSQL text refuses).
                &crate::replies::truncate(&plan.why),
                &t.now.0,
                &crate::operator::HELD,
            ],
        )
        .await?;
    if changed != 1 {
        return Ok(false);
    }
    if plan.next == StepState::Pending {
        // Back in the queue, now or after its retry delay: sleeping schedulers must learn of it
        // (a sweep's re-queue would otherwise wait for their next poll).
        t.mark_queued();
    }
    t.event(task_id, Some(id), plan.kind, EventLevel::Info, actor, plan.detail).await?;
    if let Some(alert) = plan.alert {
        t.event(task_id, Some(id), ev::STEP_ERROR, EventLevel::Alert, actor, alert).await?;
    }
    Ok(true)
}

/// An `alert_only` step's lease lapsed: it stays with its holder, past any deadline, and an alert
/// says so. Fenced like a take-back, so that it is raised once.
async fn overdue(t: &Tx<'_>, h: &Held, actor: &str) -> Result<(), StoreError> {
    let changed = t
        .execute(
            "UPDATE steps SET complete_by = $3, updated_at = $4
             WHERE id = $1 AND lease_token = $2 AND state = 'processing'",
            &[&h.id.0, &h.lease_token, &NO_DEADLINE, &t.now.0],
        )
        .await?;
    if changed == 1 {
        let detail = serde_json::json!({"held_by": h.locked_by, "lease_token": h.lease_token});
        t.event(h.task_id, Some(h.id), ev::STEP_OVERDUE, EventLevel::Alert, actor, detail).await?;
    }
    Ok(())
}
