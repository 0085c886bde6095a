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
use shiftboss_core::{StepState, TaskId, Timestamp};
use shiftboss_store::advance::{advance_task, error_text, refuse_reply, write_plan};
use shiftboss_store::lapse::{self, LapsedStep};
use shiftboss_store::{Reply, ReplyOutcome, ReplyResult, StoreError, event_kind as ev};

pub fn record_reply(t: &Tx<'_>, actor: &str, r: &Reply, policies: &RetryPolicies) -> Result<ReplyOutcome, StoreError> {
    let outcome = match &r.result {
        ReplyResult::Failed(_) | ReplyResult::Postponed(_) => record_next_try(t, actor, r, policies)?,
        _ => end_fenced(t, actor, r)?,
    };
    match outcome {
        Some(applied) => Ok(applied),
        None => run_now(refuse_reply(t, actor, r)),
    }
}

/// A failed attempt (M5): the step runs again after its retry policy's next interval, its failure
/// count one up, or goes to Error when the policy has no try left. A postponement: it runs again
/// after the delay asked, with no failure counted. `None` when the fence refused it.
fn record_next_try(
    t: &Tx<'_>,
    actor: &str,
    r: &Reply,
    policies: &RetryPolicies,
) -> Result<Option<ReplyOutcome>, StoreError> {
    type Held = (TaskId, String, u32, Option<RetryPolicy>, Option<String>, Option<Timestamp>);
    let held: Option<Held> =
        t.tx.prepare_cached(
            "SELECT task_id, agent, failure_count, retry, locked_by, deadline_at FROM steps
             WHERE id = ?1 AND lease_token = ?2 AND state = 'processing' AND kind = 'agent'",
        )
        .and_then(|mut st| {
            st.query_row(params![r.step_id.0, r.lease_token.0], |row| {
                let deadline: Option<i64> = row.get(5)?;
                let retry = crate::rows::retry_policy(row, 3)?;
                Ok((TaskId(row.get(0)?), row.get(1)?, row.get(2)?, retry, row.get(4)?, deadline.map(Timestamp)))
            })
            .optional()
        })
        .map_err(map_err)?;
    let Some((task_id, agent, failure_count, retry, locked_by, deadline_at)) = held else { return Ok(None) };
    let step = LapsedStep {
        agent: &agent,
        failure_count,
        retry: retry.as_ref(),
        locked_by: locked_by.as_deref(),
        lease_token: r.lease_token.0,
        on_timeout: OnTimeout::Retry,
        deadline_at,
    };
    let plan = lapse::plan_reply(step, &r.result, t.now, policies, fastrand::f64())
        .expect("a failure or a postponement plans the step's next try");
    if !run_now(write_plan(t, r.step_id, task_id, r.lease_token.0, plan, actor))? {
        return Err(StoreError::Backend(format!("fenced update of step {} changed no row", r.step_id)));
    }
    let adv = run_now(advance_task(t, task_id, actor))?;
    Ok(Some(ReplyOutcome::Applied { task_state: adv.state, scheduled: adv.scheduled }))
}

/// Ends the step of a completion or a permanent error with an update whose WHERE is the fence
/// (this lease, still processing, an agent's step), then moves its task on. `None` when the reply
/// is a failed attempt, or when the fence refused it.
fn end_fenced(t: &Tx<'_>, actor: &str, r: &Reply) -> Result<Option<ReplyOutcome>, StoreError> {
    let (event, output, error) = match &r.result {
        ReplyResult::Completed(v) => (StepEvent::Complete, Some(v.to_string()), None),
        ReplyResult::PermanentError(e) => (StepEvent::PermanentError, None, Some(error_text(e))),
        ReplyResult::Failed(_) | ReplyResult::Postponed(_) => return Ok(None),
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
