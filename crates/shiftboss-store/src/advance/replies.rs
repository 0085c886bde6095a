//! A reply the fence refused: why, or that it is the repeat of one already applied.
//!
//! A caller that lost the answer to its commit (a connection cut during COMMIT) cannot know whether
//! its reply landed, and sends it again. If it did land, the step is still as that reply left it,
//! under the same lease token (a finished step is never claimed again, and a claim would change the
//! token): such a repeat is acknowledged as applied, with nothing written. Any other refused reply is
//! recorded as a `reply.rejected` event of its task, with the reason.

use super::error_text;
use super::tx::WriteTx;
use crate::event_kind as ev;
use crate::{Reply, ReplyOutcome, ReplyResult, StoreError};
use serde_json::{Value, json};
use shiftboss_core::model::EventLevel;
use shiftboss_core::state::StepEvent;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepState, TaskId};

/// What a store reads of a step whose reply the fence refused.
#[derive(Debug, Clone)]
pub struct RepliedStep {
    /// Its task, on which a refusal is recorded.
    pub task_id: TaskId,
    /// Where the step stands now.
    pub state: StepState,
    /// The token of its latest claim.
    pub lease_token: i64,
    /// What the step is: only an agent step takes replies.
    pub kind: StepKind,
    /// Its output, to tell an applied completion's repeat.
    pub output: Option<Value>,
    /// Its last failure's reason, to tell an applied error's or failure's repeat.
    pub last_error: Option<String>,
}

/// The outcome of a reply the fence refused; records a `reply.rejected` event unless the reply is
/// the repeat of one applied.
pub async fn refuse_reply<T: WriteTx>(t: &T, actor: &str, r: &Reply) -> Result<ReplyOutcome, StoreError> {
    // An operator's rerun removes the rows it runs again: the step may have gone since.
    let Some(step) = t.replied_step(r.step_id).await? else {
        return Ok(ReplyOutcome::Rejected { reason: format!("step {} does not exist", r.step_id) });
    };
    if step.kind != StepKind::Agent {
        // Control steps hold no lease: no reply may move them. Not recorded.
        return Ok(ReplyOutcome::Rejected { reason: format!("step {} is a control step, not an agent's", r.step_id) });
    }
    if is_repeat(&step, r) {
        let task_state = t.load_task(step.task_id).await?.state;
        return Ok(ReplyOutcome::AlreadyApplied { task_state });
    }
    let reason = if step.lease_token != r.lease_token.0 {
        format!("lease {} lapsed; the step was claimed again (lease {})", r.lease_token.0, step.lease_token)
    } else {
        let event = match &r.result {
            ReplyResult::Completed(_) => StepEvent::Complete,
            ReplyResult::PermanentError(_) => StepEvent::PermanentError,
            ReplyResult::Failed(_) => StepEvent::Fail { give_up: false },
            ReplyResult::Postponed(_) => StepEvent::Postpone { give_up: false },
        };
        match step.state.on(event) {
            Err(e) => format!("the step is {}, no longer processing: {e}", step.state),
            Ok(_) => format!("the step is {}, no longer processing", step.state),
        }
    };
    let detail = json!({"lease_token": r.lease_token.0, "reason": reason});
    t.event(step.task_id, Some(r.step_id), ev::REPLY_REJECTED, EventLevel::Info, actor, detail).await?;
    Ok(ReplyOutcome::Rejected { reason })
}

/// True when the step is exactly as this reply, applied under this lease, left it.
fn is_repeat(step: &RepliedStep, r: &Reply) -> bool {
    if step.lease_token != r.lease_token.0 {
        return false;
    }
    match &r.result {
        ReplyResult::Completed(v) => step.state == StepState::Processed && step.output.as_ref() == Some(v),
        ReplyResult::PermanentError(e) => {
            step.state == StepState::Error && step.last_error.as_deref() == Some(error_text(e).as_str())
        }
        // Back in the queue for its next try (not claimed since: the token is the same), or in
        // Error when the policy gave up, with this very reason.
        ReplyResult::Failed(reason) => {
            matches!(step.state, StepState::Pending | StepState::Error)
                && step.last_error.as_deref() == Some(error_text(reason).as_str())
        }
        // Back in the queue until its delay ends, or in Error past its total timeout.
        ReplyResult::Postponed(after) => {
            matches!(step.state, StepState::Pending | StepState::Error)
                && step.last_error.as_deref() == Some(error_text(&crate::lapse::postponed_why(*after)).as_str())
        }
    }
}
