//! Recording agents' replies (P15, P16): each fenced by its lease token, so a reply from a claim
//! that has lapsed can never overwrite newer state.

use crate::error::map_err;
use crate::tx::Tx;
use crate::writes::run_now;
use rusqlite::{OptionalExtension, params};
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::state::StepEvent;
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepState, TaskId};
use shiftboss_store::advance::{advance_task, error_text, write_plan};
use shiftboss_store::lapse::{self, LapsedStep};
use shiftboss_store::{Reply, ReplyOutcome, ReplyResult, StoreError, event_kind as ev};

/// What a reply needs of its step.
struct Replied {
    task_id: TaskId,
    state: StepState,
    token: i64,
    is_agent: bool,
}

pub fn record_reply(t: &Tx<'_>, actor: &str, r: &Reply, policies: &RetryPolicies) -> Result<ReplyOutcome, StoreError> {
    if let Some(applied) = end_fenced(t, actor, r)? {
        return Ok(applied);
    }
    // A failed attempt, or a reply the fence refused: read the step to plan the retry, or to say
    // why it was refused.
    let row =
        t.tx.prepare_cached("SELECT task_id, state, lease_token, kind = 'agent' FROM steps WHERE id = ?1")
            .and_then(|mut st| {
                st.query_row([r.step_id.0], |row| {
                    Ok(Replied {
                        task_id: TaskId(row.get(0)?),
                        state: crate::rows::parsed::<StepState>(row, 1, "steps.state")?,
                        token: row.get(2)?,
                        is_agent: row.get(3)?,
                    })
                })
                .optional()
            })
            .map_err(map_err)?;
    let Some(step) = row else {
        return Ok(ReplyOutcome::Rejected { reason: format!("step {} does not exist", r.step_id) });
    };
    let (task_id, state, token) = (step.task_id, step.state, step.token);
    if !step.is_agent {
        // Control steps hold no lease: no reply may move them.
        return Ok(ReplyOutcome::Rejected { reason: format!("step {} is a control step, not an agent's", r.step_id) });
    }
    let event = match &r.result {
        ReplyResult::Completed(_) => StepEvent::Complete,
        ReplyResult::PermanentError(_) => StepEvent::PermanentError,
        // Whether it gives up is the policy's to say below; either way it needs a processing step.
        ReplyResult::Failed(_) => StepEvent::Fail { give_up: false },
    };
    match state.on(event) {
        Ok(_) if token == r.lease_token.0 => {}
        outcome => {
            let reason = if token != r.lease_token.0 {
                format!("lease {} lapsed; the step was claimed again (lease {token})", r.lease_token.0)
            } else {
                format!("the step is {state}, no longer processing: {}", outcome.unwrap_err())
            };
            t.event(
                task_id,
                Some(r.step_id),
                ev::REPLY_REJECTED,
                EventLevel::Info,
                actor,
                json!({"lease_token": r.lease_token.0, "reason": reason}),
            )?;
            return Ok(ReplyOutcome::Rejected { reason });
        }
    }
    let ReplyResult::Failed(reason) = &r.result else {
        // The fence refused this reply, yet the step as read would take it: the two disagree.
        return Err(StoreError::Backend(format!(
            "step {} is {state} under lease {token}, yet its fenced update changed no row",
            r.step_id
        )));
    };
    // Only a failure needs the count and the policy: a completion does not parse them.
    let (agent, failure_count, retry, locked_by): (String, u32, Option<RetryPolicy>, Option<String>) =
        t.tx.prepare_cached("SELECT agent, failure_count, retry, locked_by FROM steps WHERE id = ?1")
            .and_then(|mut st| {
                st.query_row([r.step_id.0], |row| {
                    Ok((row.get(0)?, row.get(1)?, crate::rows::retry_policy(row, 2)?, row.get(3)?))
                })
            })
            .map_err(map_err)?;
    let held = LapsedStep {
        agent: &agent,
        failure_count,
        retry: retry.as_ref(),
        locked_by: locked_by.as_deref(),
        lease_token: token,
        on_timeout: OnTimeout::Retry,
    };
    let plan = lapse::plan_failure(held, reason, t.now, policies, fastrand::f64());
    if !run_now(write_plan(t, r.step_id, task_id, token, plan, actor))? {
        return Err(StoreError::Backend(format!("fenced update of step {} changed no row", r.step_id)));
    }
    let adv = run_now(advance_task(t, task_id, actor))?;
    Ok(ReplyOutcome::Applied { task_state: adv.state, scheduled: adv.scheduled })
}

/// Ends the step of a completion or a permanent error with an update whose WHERE is the fence
/// (this lease, still processing, an agent's step), then moves its task on. `None` when the reply
/// is a failed attempt, or when the fence refused it.
fn end_fenced(t: &Tx<'_>, actor: &str, r: &Reply) -> Result<Option<ReplyOutcome>, StoreError> {
    let (event, output, error) = match &r.result {
        ReplyResult::Completed(v) => (StepEvent::Complete, Some(v.to_string()), None),
        ReplyResult::PermanentError(e) => (StepEvent::PermanentError, None, Some(error_text(e))),
        ReplyResult::Failed(_) => return Ok(None),
    };
    let next = StepState::Processing
        .on(event)
        .map_err(|e| StoreError::Backend(format!("a processing step cannot take a {event:?} reply: {e}")))?;
    let changed =
        t.tx.prepare_cached(
            "UPDATE steps SET state = ?3, output = ?4, last_error = coalesce(?5, last_error),
                    locked_by = NULL, complete_by = NULL, updated_at = ?6
             WHERE id = ?1 AND lease_token = ?2 AND state = 'processing' AND kind = 'agent'",
        )
        .and_then(|mut st| st.execute(params![r.step_id.0, r.lease_token.0, next.as_str(), output, error, t.now.0]))
        .map_err(map_err)?;
    if changed == 0 {
        return Ok(None);
    }
    // Read after the write, not with RETURNING: SQLite collects returned rows in a temporary
    // b-tree it opens and closes on every run, which made this update cost twice the read.
    let task_id =
        t.tx.prepare_cached("SELECT task_id FROM steps WHERE id = ?1")
            .and_then(|mut st| st.query_row([r.step_id.0], |row| row.get(0)))
            .map(TaskId)
            .map_err(map_err)?;
    match &error {
        None => t.event(task_id, Some(r.step_id), ev::STEP_PROCESSED, EventLevel::Info, actor, json!({}))?,
        Some(e) => t.event(
            task_id,
            Some(r.step_id),
            ev::STEP_ERROR,
            EventLevel::Alert,
            actor,
            json!({"reason": "permanent error", "error": e}),
        )?,
    }
    let adv = run_now(advance_task(t, task_id, actor))?;
    Ok(Some(ReplyOutcome::Applied { task_state: adv.state, scheduled: adv.scheduled }))
}
