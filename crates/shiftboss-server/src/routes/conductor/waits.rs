//! Ending Conductor's WAIT and HUMAN tasks from outside, as Conductor's clients do: an update of
//! the task (`POST /api/tasks` with status COMPLETED, the taskId the workflow lists), or an update
//! by reference name (`POST /api/tasks/{workflowId}/{taskRefName}/{status}`). Either ends the wait
//! step with the output as its payload, which is an operator's signal in shiftboss: the same store
//! verb, recorded with who sent it. An update by reference name of a claimed worker task is that
//! claim's fenced reply.

use super::wire::{self, TaskResult};
use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json;
use crate::query::Path;
use crate::routes::agents::replies;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use shiftboss_core::model::StepRecord;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepId, StepState, TaskId};
use shiftboss_store::{OperateTask, Reply, ReplyResult, TaskCommand};

/// Ends the wait step `step` of the update's workflow with the update's output.
pub async fn end_wait(
    state: &AppState,
    principal: &Principal,
    r: &TaskResult,
    step: StepId,
) -> Result<Response, ApiError> {
    let no_task = || ApiError::not_found(format!("no task {:?}", r.task_id));
    let task = r.workflow_instance_id.as_deref().and_then(crate::wire::task_id).ok_or_else(no_task)?;
    let d = state.store().get_task(task).await?.ok_or_else(no_task)?;
    let row = d.steps.iter().find(|s| s.id == step).ok_or_else(no_task)?;
    signal(state, principal, task, row, &r.status, r.output_data.clone()).await?;
    Ok(text(r.task_id.clone()))
}

/// Updates a task by its workflow and reference name; the body is its output.
#[utoipa::path(post, path = "/api/tasks/{workflowId}/{taskRefName}/{status}", tag = "conductor",
    params(("workflowId" = String, Path), ("taskRefName" = String, Path),
        ("status" = String, Path, description = "COMPLETED, FAILED or FAILED_WITH_TERMINAL_ERROR")),
    request_body(content = Object, description = "The task's output", content_type = "application/json"),
    security(("token" = ["agent"])),
    responses((status = 200, description = "Applied: the task id", content_type = "text/plain", body = String),
        (status = 400, body = Problem), (status = 404, body = Problem),
        (status = 409, description = "The task is not waiting or held", body = Problem)))]
pub async fn update_by_ref(
    State(state): State<AppState>,
    principal: Principal,
    Path((workflow, reference, status)): Path<(String, String, String)>,
    req: Request,
) -> Result<Response, ApiError> {
    let bytes = json::body_bytes(req, &state).await?;
    let output: Value = if bytes.iter().all(u8::is_ascii_whitespace) { json!({}) } else { json::parse(&bytes)? };
    let no_workflow = || ApiError::not_found(format!("no workflow {workflow}"));
    let task = crate::wire::task_id(&workflow).ok_or_else(no_workflow)?;
    let d = state.store().get_task(task).await?.ok_or_else(no_workflow)?;
    // The live instance of the reference (a loop's latest pass).
    let live = |s: &&StepRecord| {
        shiftboss_core::decider::base_name(&s.name) == reference
            && matches!(s.state, StepState::Pending | StepState::Processing)
    };
    let row = d.steps.iter().rev().find(live).ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "not_waiting",
            format!("workflow {workflow} has no live task {reference:?}"),
        )
    })?;
    if row.kind == StepKind::Wait {
        signal(&state, &principal, task, row, &status, Some(output)).await?;
        return Ok(text(wire::task_id(row.id, row.lease_token)));
    }
    if row.kind != StepKind::Agent || row.state != StepState::Processing {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_held",
            format!("task {reference:?} is {}: only a waiting or a claimed task is updated by reference", row.state),
        ));
    }
    let result = match status.as_str() {
        "COMPLETED" => ReplyResult::Completed(output),
        "FAILED" => ReplyResult::Failed(format!("updated as FAILED by {}", principal.name)),
        "FAILED_WITH_TERMINAL_ERROR" => {
            ReplyResult::PermanentError(format!("updated as FAILED_WITH_TERMINAL_ERROR by {}", principal.name))
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "status: {other:?} is not one of COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR"
            )));
        }
    };
    let reply = Reply { step_id: row.id, lease_token: row.lease_token, result };
    let holder = row.locked_by.as_deref().and_then(|w| w.strip_prefix("worker:"));
    replies::reply(&state, &principal, holder, reply).await?;
    Ok(text(wire::task_id(row.id, row.lease_token)))
}

/// Ends a waiting wait step with `output`: only as COMPLETED (a wait has nothing to fail).
async fn signal(
    state: &AppState,
    principal: &Principal,
    task: TaskId,
    row: &StepRecord,
    status: &str,
    output: Option<Value>,
) -> Result<(), ApiError> {
    if row.kind != StepKind::Wait || row.state != StepState::Processing {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "lease_lost",
            format!("step {} is {} and no wait: the update changes nothing", row.id, row.state),
        ));
    }
    if status != "COMPLETED" {
        return Err(ApiError::bad_request(format!(
            "status: a WAIT or HUMAN task ends only as COMPLETED, not {status:?} (terminate the workflow to stop it)"
        )));
    }
    let command = TaskCommand::Signal { name: row.name.clone(), payload: output.unwrap_or_else(|| json!({})) };
    let reason = "Conductor API: task update".to_owned();
    state.store().operate_task(OperateTask { task_id: task, actor: principal.name.clone(), reason, command }).await?;
    state.engine.wake();
    Ok(())
}

fn text(s: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], s).into_response()
}
