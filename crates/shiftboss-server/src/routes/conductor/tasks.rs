//! Conductor's worker routes: poll (one or a batch) and update. A poll is the worker protocol's
//! claim under the instance `worker:<workerid>`; an update is its fenced reply or heartbeat, the
//! claim named by the `taskId` the poll handed out (`<step id>-<lease token>`), so an update for
//! a claim that lapsed, was taken again or ended is refused (409) and changes nothing.

use super::wire::{self, Task, TaskExecLog, TaskResult};
use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::{Path, Query};
use crate::routes::agents::poll::{MAX_CAPACITY, check_remote, claim_waiting, note_seen};
use crate::routes::agents::replies;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shiftboss_core::{InstanceId, StepId};
use shiftboss_store::{ClaimDueSteps, ExtendLease, Reply, ReplyResult, StepLogs, StoreError, check_worker_id};
use std::time::Duration;
use utoipa::IntoParams;

/// Conductor's poll parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PollParams {
    /// The worker's id (1 to 100 visible ASCII characters); the token's name when absent.
    pub workerid: Option<String>,
    /// An isolation domain the worker serves, besides steps with none.
    pub domain: Option<String>,
    /// How many tasks at most (batch poll only; 1 to 1,000, default 1).
    pub count: Option<u32>,
    /// How long to wait for work when none is due, in milliseconds (default 100; capped at 20 s).
    pub timeout: Option<u64>,
}

/// Claims up to `count` tasks of the type for the worker, waiting up to `timeout` ms.
async fn claim(
    state: &AppState,
    principal: &Principal,
    tasktype: String,
    p: PollParams,
    count: u32,
) -> Result<Vec<Task>, ApiError> {
    check_remote(state, &tasktype)?;
    let worker = p.workerid.unwrap_or_else(|| principal.name.clone());
    check_worker_id(&worker).map_err(|e| ApiError::bad_request(format!("workerid: {e}")))?;
    let instance =
        InstanceId::new(format!("worker:{worker}")).map_err(|e| ApiError::bad_request(format!("workerid: {e}")))?;
    if count == 0 || count > MAX_CAPACITY {
        return Err(ApiError::bad_request(format!("count: 1 to {MAX_CAPACITY}")));
    }
    let domains = match p.domain.filter(|d| !d.is_empty()) {
        None => Vec::new(),
        Some(d) => {
            shiftboss_core::workflow::check_name("domain", &d)
                .map_err(|e| ApiError::bad_request(format!("domain: {e}")))?;
            vec![d]
        }
    };
    let agents = vec![tasktype];
    note_seen(state, &worker, &agents).await;
    let claim = ClaimDueSteps {
        instance,
        limit: count,
        agents,
        buckets: None,
        domains,
        limits: state.engine.agent_limits().to_vec(),
    };
    let wait = Duration::from_millis(p.timeout.unwrap_or(100));
    let steps = claim_waiting(state, claim, wait).await?;
    Ok(steps.into_iter().map(|s| wire::polled(s, &worker)).collect())
}

/// Claims one task of this type (the agent type; it must be declared remote), waiting up to
/// `timeout` ms: the task, or 204 when none became due.
#[utoipa::path(get, path = "/api/tasks/poll/{tasktype}", tag = "conductor",
    params(("tasktype" = String, Path), PollParams),
    security(("token" = ["agent"])),
    responses((status = 200, body = Task), (status = 204, description = "No task became due in the wait"),
        (status = 422, description = "Not a remote agent type", body = Problem)))]
pub async fn poll(
    State(state): State<AppState>,
    principal: Principal,
    Path(tasktype): Path<String>,
    Query(p): Query<PollParams>,
) -> Result<Response, ApiError> {
    let mut tasks = claim(&state, &principal, tasktype, p, 1).await?;
    Ok(match tasks.pop() {
        Some(t) => Json(t).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    })
}

/// Claims up to `count` tasks of this type, highest priority first, waiting up to `timeout` ms
/// when none is due; `[]` when none became due.
#[utoipa::path(get, path = "/api/tasks/poll/batch/{tasktype}", tag = "conductor",
    params(("tasktype" = String, Path), PollParams),
    security(("token" = ["agent"])),
    responses((status = 200, body = Vec<Task>), (status = 422, description = "Not a remote agent type", body = Problem)))]
pub async fn batch_poll(
    State(state): State<AppState>,
    principal: Principal,
    Path(tasktype): Path<String>,
    Query(p): Query<PollParams>,
) -> Result<Json<Vec<Task>>, ApiError> {
    let count = p.count.unwrap_or(1);
    claim(&state, &principal, tasktype, p, count).await.map(Json)
}

/// A worker's update of a task it polled. COMPLETED: the step is done with `outputData`.
/// FAILED: a failed attempt (retried by the step's policy). FAILED_WITH_TERMINAL_ERROR: the
/// step fails for good. IN_PROGRESS with `callbackAfterSeconds` (and no `extendLease`): the
/// task goes back to the queue, polled again after that many seconds, with no failure counted.
/// Other IN_PROGRESS updates (`extendLease`, the SDKs' lease trackers): a heartbeat that moves
/// the claim's complete-by on. Answers the task id as text; 409 when the
/// claim is no longer the step's (lapsed, taken again, or ended): nothing changed.
#[utoipa::path(post, path = "/api/tasks", tag = "conductor", request_body = TaskResult,
    security(("token" = ["agent"])),
    responses((status = 200, description = "Applied (or an identical repeat): the task id", content_type = "text/plain", body = String),
        (status = 400, description = "A status shiftboss does not take", body = Problem),
        (status = 404, description = "Not a task id this server handed out", body = Problem),
        (status = 409, description = "lease_lost: the claim is no longer the step's", body = Problem)))]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Json(r): Json<TaskResult>,
) -> Result<Response, ApiError> {
    let (step_id, lease_token) =
        wire::parse_task_id(&r.task_id).ok_or_else(|| ApiError::not_found(format!("no task {:?}", r.task_id)))?;
    // Checked before the update is applied, written after: a refused line refuses the update, a
    // taken update is not refused for its lines.
    let logs = step_logs(&principal, &r, step_id)?;
    // A step never claimed (its token is 0) is no worker's: a WAIT or HUMAN task, which the
    // update ends (its lines kept as a worker's are).
    if lease_token.0 == 0 {
        let answer = super::waits::end_wait(&state, &principal, &r, step_id).await?;
        keep_logs(&state, logs).await;
        return Ok(answer);
    }
    let reason = || r.reason_for_incompletion.clone().filter(|s| !s.trim().is_empty());
    let result = match r.status.as_str() {
        "COMPLETED" => ReplyResult::Completed(r.output_data.clone().unwrap_or_else(|| serde_json::json!({}))),
        "FAILED" => ReplyResult::Failed(reason().unwrap_or_else(|| "the worker reported FAILED".into())),
        "FAILED_WITH_TERMINAL_ERROR" => ReplyResult::PermanentError(
            reason().unwrap_or_else(|| "the worker reported FAILED_WITH_TERMINAL_ERROR".into()),
        ),
        "IN_PROGRESS" => {
            // Conductor keeps an IN_PROGRESS update's outputData on the task: here, the step's progress.
            let progress =
                r.output_data.clone().filter(|v| !v.is_null() && v.as_object().is_none_or(|m| !m.is_empty()));
            match r.callback_after_seconds.filter(|s| *s > 0 && !r.extend_lease) {
                // Back to the queue, polled again after that many seconds (Conductor's callback);
                // the lease trackers' `extendLease` updates stay heartbeats.
                Some(seconds) => {
                    // Conductor sets no bound: a longer callback waits the longest the store takes.
                    let seconds = (seconds as u64).min(shiftboss_store::MAX_POSTPONE.as_secs());
                    let result = replies::postponement(seconds * 1000)?;
                    replies::keep_progress(&state, step_id, lease_token, progress).await?;
                    result
                }
                None => {
                    let answer = heartbeat(&state, &r.task_id, ExtendLease { step_id, lease_token, progress }).await?;
                    keep_logs(&state, logs).await;
                    return Ok(answer);
                }
            }
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "status: {other:?} is not one of COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR, IN_PROGRESS"
            )));
        }
    };
    let reply = Reply { step_id, lease_token, result };
    replies::reply(&state, &principal, r.worker_id.as_deref(), reply).await?;
    keep_logs(&state, logs).await;
    Ok(text(r.task_id))
}

/// A TaskResult's log lines for the step, checked; none when it has none.
fn step_logs(principal: &Principal, r: &TaskResult, step_id: StepId) -> Result<Option<StepLogs>, ApiError> {
    let lines = wire::log_lines(r.logs.as_ref());
    if lines.is_empty() {
        return Ok(None);
    }
    let actor = match r.worker_id.as_deref().filter(|w| !w.is_empty()) {
        Some(w) => format!("worker:{w}"),
        None => principal.name.clone(),
    };
    let logs = StepLogs { step_id, actor, lines };
    logs.validate().map_err(|e| ApiError::bad_request(format!("logs: {e}")))?;
    Ok(Some(logs))
}

/// Writes the lines of an update that was taken. A failure here is logged, not answered: the
/// update itself stands, and the worker would only send it again.
async fn keep_logs(state: &AppState, logs: Option<StepLogs>) {
    if let Some(logs) = logs {
        let step = logs.step_id;
        if let Err(e) = state.store().append_step_logs(logs).await {
            tracing::warn!(step = %step, error = %e, "a task update's log lines were not kept");
        }
    }
}

/// A task's log lines (Conductor's TaskExecLogs), oldest first; `[]` for a task with none.
#[utoipa::path(get, path = "/api/tasks/{taskId}/log", tag = "conductor",
    params(("taskId" = String, Path)), security(("token" = ["read"])),
    responses((status = 200, body = Vec<TaskExecLog>), (status = 404, body = Problem)))]
pub async fn logs(
    State(state): State<AppState>,
    Path(task_id): Path<String>,
) -> Result<Json<Vec<TaskExecLog>>, ApiError> {
    let (step_id, _) =
        wire::parse_task_id(&task_id).ok_or_else(|| ApiError::not_found(format!("no task {task_id:?}")))?;
    let events = state.store().step_logs(step_id).await?;
    let line = |e: &shiftboss_core::model::EventRecord| e.detail.get("log").and_then(|l| l.as_str()).map(str::to_owned);
    Ok(Json(
        events
            .iter()
            .filter_map(|e| line(e).map(|log| TaskExecLog { log, task_id: task_id.clone(), created_time: e.at.0 }))
            .collect(),
    ))
}

/// Adds a log line to a task (the body: the line, as a JSON string or as text).
#[utoipa::path(post, path = "/api/tasks/{taskId}/log", tag = "conductor",
    params(("taskId" = String, Path)),
    request_body(content = String, description = "The log line", content_type = "application/json"),
    security(("token" = ["agent"])),
    responses((status = 200, description = "Kept"), (status = 400, body = Problem), (status = 404, body = Problem)))]
pub async fn add_log(
    State(state): State<AppState>,
    principal: Principal,
    Path(task_id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let (step_id, _) =
        wire::parse_task_id(&task_id).ok_or_else(|| ApiError::not_found(format!("no task {task_id:?}")))?;
    let body = crate::json::body_bytes(req, &state).await?;
    let text = std::str::from_utf8(&body).map_err(|_| ApiError::bad_request("the log line is not UTF-8"))?;
    // Conductor's SDKs send the line as a JSON string; anything that is not one is the line itself.
    let line = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::String(s)) => s,
        _ => text.to_owned(),
    };
    let logs = StepLogs { step_id, actor: principal.name.clone(), lines: vec![line] };
    logs.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    match state.store().append_step_logs(logs).await {
        Ok(()) => Ok(StatusCode::OK.into_response()),
        Err(StoreError::NotFound { .. }) => Err(ApiError::not_found(format!("no task {task_id:?}"))),
        Err(e) => Err(e.into()),
    }
}

async fn heartbeat(state: &AppState, task_id: &str, e: ExtendLease) -> Result<Response, ApiError> {
    match state.store().extend_lease(e).await {
        Ok(_) => Ok(text(task_id.to_owned())),
        Err(StoreError::Conflict(_)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "lease_lost",
            format!("task {task_id}: the claim is no longer held (it lapsed, was taken again, or ended)"),
        )),
        Err(e) => Err(e.into()),
    }
}

fn text(s: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], s).into_response()
}
