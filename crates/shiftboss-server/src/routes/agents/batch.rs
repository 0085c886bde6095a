//! `POST /v1/agents/replies`: a worker's replies for many steps in one request. A worker that
//! runs hundreds of steps at once would otherwise send a request per step; here the server
//! answers each reply on its own (applied, repeated, lease lost, invalid) and the engine's group
//! commit writes them together.

use super::replies::{actor, step_and_token};
use super::wire::{BatchAnswer, BatchResult, ReplyBatch};
use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::state::AppState;
use axum::extract::State;
use futures_util::future::join_all;
use shiftboss_store::{Reply, ReplyOutcome, ReplyResult};

/// The most replies one request may carry.
pub const MAX_BATCH_REPLIES: usize = 1000;

/// Records many replies, each fenced by its own lease token and answered on its own, in the
/// request's order. The request fails as a whole only when the store cannot be reached (503):
/// sending the same batch again is safe, as replies already applied come back `repeated`.
#[utoipa::path(post, path = "/v1/agents/replies", tag = "agents", request_body = ReplyBatch,
    security(("token" = ["agent"])),
    responses((status = 200, body = BatchAnswer), (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn replies(
    State(state): State<AppState>,
    principal: Principal,
    Json(batch): Json<ReplyBatch>,
) -> Result<Json<BatchAnswer>, ApiError> {
    if batch.replies.is_empty() || batch.replies.len() > MAX_BATCH_REPLIES {
        return Err(ApiError::invalid(format!("replies: 1 to {MAX_BATCH_REPLIES}")));
    }
    let instance = actor(&principal, batch.worker.as_deref())?;
    let mut results: Vec<Option<BatchResult>> = Vec::with_capacity(batch.replies.len());
    let mut pending = Vec::new();
    for (i, r) in batch.replies.into_iter().enumerate() {
        let invalid = |detail: String| BatchResult {
            step_id: r.step_id.clone(),
            outcome: "invalid".into(),
            task_state: None,
            detail: Some(detail),
        };
        let parsed = step_and_token(&r.step_id, &r.lease_token);
        let result = match (r.output, r.failure, r.postpone_ms) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                Err("give one of output, failure and postpone_ms".to_owned())
            }
            (_, Some(f), _) if f.reason.trim().is_empty() => {
                Err("failure.reason: say why the attempt failed".to_owned())
            }
            (_, Some(f), _) if f.permanent => Ok(ReplyResult::PermanentError(f.reason)),
            (_, Some(f), _) => Ok(ReplyResult::Failed(f.reason)),
            (_, _, Some(ms)) => super::replies::postponement(ms).map_err(|e| e.detail),
            (output, None, None) => Ok(ReplyResult::Completed(output.unwrap_or_else(|| serde_json::json!({})))),
        };
        match (parsed, result) {
            (Ok((step_id, lease_token)), Ok(result)) => {
                results.push(None);
                pending.push((i, r.step_id, Reply { step_id, lease_token, result }));
            }
            (Err(e), _) => results.push(Some(invalid(e.detail))),
            (_, Err(detail)) => results.push(Some(invalid(detail))),
        }
    }
    let written = join_all(pending.into_iter().map(|(i, step_id, reply)| {
        let (state, instance) = (&state, instance.clone());
        async move { (i, step_id, state.engine.record_reply(instance, reply).await) }
    }))
    .await;
    for (i, step_id, outcome) in written {
        let (outcome, task_state, detail) = match outcome? {
            ReplyOutcome::Applied { task_state, .. } => ("applied", Some(task_state.as_str().to_owned()), None),
            ReplyOutcome::AlreadyApplied { task_state } => ("repeated", Some(task_state.as_str().to_owned()), None),
            ReplyOutcome::Rejected { reason } => ("lease_lost", None, Some(reason)),
        };
        results[i] = Some(BatchResult { step_id, outcome: outcome.into(), task_state, detail });
    }
    Ok(Json(BatchAnswer { results: results.into_iter().flatten().collect() }))
}
