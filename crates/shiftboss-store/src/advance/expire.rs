//! Taking back held steps (P6, P17): the supervisor's sweep of lapsed leases (and of due attempts
//! no one claimed within their claim timeout), a restarted scheduler's release of what it held,
//! and a failed attempt its agent reported. The store reads
//! the held steps; what becomes of each is planned by `lapse` and written here, fenced by the lease
//! token it was read with, so that each lapse is counted once.

use super::decide::advance_task;
use super::tx::WriteTx;
use crate::event_kind as ev;
use crate::lapse::{self, Lapse, LapsePlan, LapsedStep};
use crate::{ExpiryReport, StoreError};
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepId, TaskId, Timestamp};

/// A processing step as a store read it to take it back (or a pending one past its claim timeout).
#[derive(Debug, Clone)]
pub struct HeldStep {
    /// The step's id.
    pub id: StepId,
    /// Its task, locked before the step is taken back.
    pub task_id: TaskId,
    /// Its agent, whose retry policy applies when the row carries none.
    pub agent: String,
    /// Failures counted so far, before this lapse.
    pub failure_count: u32,
    /// The claim's token: the take-back is fenced by it.
    pub lease_token: i64,
    /// Its holder, named in the events.
    pub locked_by: Option<String>,
    /// The retry policy on the step's row (its own, its workflow's or a job's), if any.
    pub retry: Option<RetryPolicy>,
    /// Its timeout policy: on an expiry, `alert_only` keeps the step with its holder, `fail_task` gives up.
    pub on_timeout: OnTimeout,
    /// When all its attempts must have ended (its total timeout), if it has one.
    pub deadline_at: Option<Timestamp>,
}

/// Takes the held steps back, their tasks locked first; a step that gives up moves its task on.
pub async fn take_back<T: WriteTx>(
    t: &T,
    held: Vec<HeldStep>,
    policies: &RetryPolicies,
    lapse: Lapse,
    actor: &str,
) -> Result<ExpiryReport, StoreError> {
    t.lock_tasks(&held.iter().map(|h| h.task_id).collect::<Vec<_>>()).await?;
    let mut report = ExpiryReport::default();
    for h in held {
        if lapse == Lapse::Expired && h.on_timeout == OnTimeout::AlertOnly {
            // The step stays with its holder, past any deadline, and an alert says so, once.
            if t.mark_overdue(h.id, h.lease_token).await? {
                let detail = serde_json::json!({"held_by": h.locked_by, "lease_token": h.lease_token});
                t.event(h.task_id, Some(h.id), ev::STEP_OVERDUE, EventLevel::Alert, actor, detail).await?;
            }
            continue;
        }
        if lapse == Lapse::Unclaimed && h.on_timeout == OnTimeout::AlertOnly {
            // The step stays in the queue for a worker, and an alert says so, once.
            if t.mark_unclaimed(h.id, h.lease_token).await? {
                let detail = serde_json::json!({"unclaimed": true, "failure_count": h.failure_count});
                t.event(h.task_id, Some(h.id), ev::STEP_OVERDUE, EventLevel::Alert, actor, detail).await?;
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
            deadline_at: h.deadline_at,
        };
        let plan = lapse::plan(step, lapse, t.now(), policies, fastrand::f64());
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

/// Writes what becomes of a held step with its events; false when the step had moved on (the
/// fence refused it). The caller holds the task's lock, and moves the task on.
pub async fn write_plan<T: WriteTx>(
    t: &T,
    id: StepId,
    task_id: TaskId,
    lease_token: i64,
    mut plan: LapsePlan,
    actor: &str,
) -> Result<bool, StoreError> {
    plan.why = super::error_text(&plan.why);
    if !t.write_lapse(id, lease_token, &plan).await? {
        return Ok(false);
    }
    t.event(task_id, Some(id), plan.kind, EventLevel::Info, actor, plan.detail).await?;
    if let Some(alert) = plan.alert {
        t.event(task_id, Some(id), ev::STEP_ERROR, EventLevel::Alert, actor, alert).await?;
    }
    Ok(true)
}
