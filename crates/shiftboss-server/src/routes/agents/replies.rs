//! A worker's answers for a step it holds: heartbeat, complete, fail, postpone. Each carries the
//! claim's lease token; the store's fence decides, so a stale token changes nothing.

use super::wire::{CompleteRequest, FailRequest, HeartbeatAnswer, HeartbeatRequest, PostponeRequest, ReplyAnswer};
use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::Path;
use crate::state::AppState;
use crate::wire::{parse_id, time};
use axum::extract::State;
use axum::http::StatusCode;
use shiftboss_core::{InstanceId, LeaseToken, StepId};
use shiftboss_store::{ExtendLease, MAX_POSTPONE, Reply, ReplyOutcome, ReplyResult, StoreError};
use std::time::Duration;

/// Who a reply is recorded as: `worker:<id>` when the worker names itself, else the token's name.
pub(crate) fn actor(principal: &Principal, worker: Option<&str>) -> Result<InstanceId, ApiError> {
    match worker {
        Some(w) => super::poll::worker_instance(w),
        None => InstanceId::new(principal.name.clone()).map_err(|e| ApiError::invalid(format!("worker: {e}"))),
    }
}

/// A reply's token that is not the step's current lease: the lease lapsed and the step went to
/// another worker, or the step ended. Nothing was changed.
fn lease_lost(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "lease_lost", detail)
}

pub(crate) fn step_and_token(id: &str, token: &str) -> Result<(StepId, LeaseToken), ApiError> {
    let step = parse_id(id).map(StepId).ok_or_else(|| ApiError::not_found(format!("no step {id}")))?;
    let token = token
        .parse::<i64>()
        .map(LeaseToken)
        .map_err(|_| ApiError::invalid("lease_token: not a token this server handed out"))?;
    Ok((step, token))
}

/// Moves the step's complete-by on by its response timeout (never past its claim plus its
/// timeout: a step with no response timeout gains nothing). The answer says whether the lease
/// is still held; when it is not, the worker stops and sends nothing more.
#[utoipa::path(post, path = "/v1/agents/steps/{id}/heartbeat", tag = "agents",
    params(("id" = String, Path)), request_body = HeartbeatRequest,
    security(("token" = ["agent"])),
    responses((status = 200, body = HeartbeatAnswer), (status = 404, body = Problem), (status = 503, body = Problem)))]
pub async fn heartbeat(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(h): Json<HeartbeatRequest>,
) -> Result<Json<HeartbeatAnswer>, ApiError> {
    let (step_id, lease_token) = step_and_token(&id, &h.lease_token)?;
    // JSON null is no report, as an absent field is.
    let progress = h.progress.filter(|p| !p.is_null());
    match state.store().extend_lease(ExtendLease { step_id, lease_token, progress }).await {
        Ok(complete_by) => {
            let now = state.store().now().await?;
            Ok(Json(HeartbeatAnswer {
                held: true,
                complete_by: Some(time(complete_by)),
                seconds_left: Some(complete_by.since(now).as_secs_f64()),
            }))
        }
        // The fence refused: lapsed, claimed again, or ended (an unknown step too).
        Err(StoreError::Conflict(_)) => {
            Ok(Json(HeartbeatAnswer { held: false, complete_by: None, seconds_left: None }))
        }
        Err(e) => Err(e.into()),
    }
}

/// The step is done with this output: it is Processed and its task moves on. A stale token is
/// 409 `lease_lost` and changes nothing; the identical repeat of an accepted reply is 200 with
/// `repeated: true` and changes nothing.
#[utoipa::path(post, path = "/v1/agents/steps/{id}/complete", tag = "agents",
    params(("id" = String, Path)), request_body = CompleteRequest,
    security(("token" = ["agent"])),
    responses((status = 200, body = ReplyAnswer), (status = 404, body = Problem),
        (status = 409, description = "lease_lost: the token is not the step's lease", body = Problem),
        (status = 503, body = Problem)))]
pub async fn complete(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(c): Json<CompleteRequest>,
) -> Result<Json<ReplyAnswer>, ApiError> {
    let (step_id, lease_token) = step_and_token(&id, &c.lease_token)?;
    let output = c.output.unwrap_or_else(|| serde_json::json!({}));
    let result = ReplyResult::Completed(output);
    reply(&state, &principal, c.worker.as_deref(), Reply { step_id, lease_token, result }).await
}

/// The attempt failed. Transient (the default): the step runs again after its retry policy's
/// delay, its failure count one up, or goes to Error when the policy has no try left. Permanent:
/// Error at once, and an operator is alerted. The lease token fences it as `complete` is fenced.
#[utoipa::path(post, path = "/v1/agents/steps/{id}/fail", tag = "agents",
    params(("id" = String, Path)), request_body = FailRequest,
    security(("token" = ["agent"])),
    responses((status = 200, body = ReplyAnswer), (status = 404, body = Problem),
        (status = 409, description = "lease_lost: the token is not the step's lease", body = Problem),
        (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn fail(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(f): Json<FailRequest>,
) -> Result<Json<ReplyAnswer>, ApiError> {
    let (step_id, lease_token) = step_and_token(&id, &f.lease_token)?;
    if f.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: say why the attempt failed"));
    }
    let result = if f.permanent { ReplyResult::PermanentError(f.reason) } else { ReplyResult::Failed(f.reason) };
    reply(&state, &principal, f.worker.as_deref(), Reply { step_id, lease_token, result }).await
}

/// Hands the step back unfinished: it is claimed again (by any worker of its agent type) once
/// `after_ms` has passed, with no failure counted and its retry policy untouched (Conductor's
/// IN_PROGRESS with `callbackAfterSeconds`). A delay that ends at or past the step's total
/// timeout sends it to Error. The lease token fences it as `complete` is fenced.
#[utoipa::path(post, path = "/v1/agents/steps/{id}/postpone", tag = "agents",
    params(("id" = String, Path)), request_body = PostponeRequest,
    security(("token" = ["agent"])),
    responses((status = 200, body = ReplyAnswer), (status = 404, body = Problem),
        (status = 409, description = "lease_lost: the token is not the step's lease", body = Problem),
        (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn postpone(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(p): Json<PostponeRequest>,
) -> Result<Json<ReplyAnswer>, ApiError> {
    let (step_id, lease_token) = step_and_token(&id, &p.lease_token)?;
    let result = postponement(p.after_ms)?;
    keep_progress(&state, step_id, lease_token, p.progress).await?;
    reply(&state, &principal, p.worker.as_deref(), Reply { step_id, lease_token, result }).await
}

/// A postponement of `ms` milliseconds, within the longest the store takes.
pub(crate) fn postponement(ms: u64) -> Result<ReplyResult, ApiError> {
    let after = Duration::from_millis(ms);
    if after > MAX_POSTPONE {
        return Err(ApiError::invalid(format!("after_ms: at most {} (a year)", MAX_POSTPONE.as_millis())));
    }
    Ok(ReplyResult::Postponed(after))
}

/// Keeps a report of progress that comes with a postponement on the step, as a heartbeat keeps
/// it, before the reply hands the step back. A refused heartbeat is left for the reply to answer
/// (`lease_lost`, or an identical repeat).
pub(crate) async fn keep_progress(
    state: &AppState,
    step_id: StepId,
    lease_token: LeaseToken,
    progress: Option<serde_json::Value>,
) -> Result<(), ApiError> {
    let Some(progress) = progress.filter(|p| !p.is_null()) else { return Ok(()) };
    match state.store().extend_lease(ExtendLease { step_id, lease_token, progress: Some(progress) }).await {
        Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub(crate) async fn reply(
    state: &AppState,
    principal: &Principal,
    worker: Option<&str>,
    reply: Reply,
) -> Result<Json<ReplyAnswer>, ApiError> {
    let instance = actor(principal, worker)?;
    let step_id = reply.step_id;
    // Written with other workers' concurrent replies in one transaction (the engine's group
    // commit); an applied reply wakes this process's scheduler for the work it queued.
    match state.engine.record_reply(instance, reply).await? {
        ReplyOutcome::Applied { task_state, .. } => {
            Ok(Json(ReplyAnswer { repeated: false, task_state: task_state.as_str().to_owned() }))
        }
        ReplyOutcome::AlreadyApplied { task_state } => {
            Ok(Json(ReplyAnswer { repeated: true, task_state: task_state.as_str().to_owned() }))
        }
        ReplyOutcome::Rejected { reason } => Err(lease_lost(format!("step {step_id}: {reason}"))),
    }
}
