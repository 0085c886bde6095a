//! Start and wait (Conductor's `POST /api/workflow/execute/{name}/{version}`): the workflow starts
//! as `POST /api/workflow` starts one, and the answer waits, up to `waitForSeconds`, for it to end
//! or for the task `waitUntilTaskRef` names to complete; it is then the workflow as it stands.

use super::wire::{StartWorkflowRequest, Task, Workflow};
use super::workflows::start_request;
use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::{Path, Query};
use crate::state::AppState;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiftboss_core::{StepState, TaskId};
use shiftboss_store::{EventFilter, TaskDetail};
use std::time::Duration;
use utoipa::{IntoParams, ToSchema};

/// The longest an answer waits.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// How long it waits when the request says nothing (Conductor's default).
const DEFAULT_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteParams {
    /// Echoed back as `requestId`.
    pub request_id: Option<String>,
    /// Answer once the task of this reference name has completed (or the workflow ended).
    pub wait_until_task_ref: Option<String>,
    /// The longest wait, in seconds (default 10, at most 60).
    pub wait_for_seconds: Option<u64>,
}

/// Conductor's WorkflowRun: the workflow as it stood when the wait ended.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRun {
    pub workflow_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// RUNNING, PAUSED, COMPLETED, FAILED, TERMINATED.
    pub status: &'static str,
    pub input: Value,
    pub output: Value,
    pub priority: i32,
    pub create_time: i64,
    pub update_time: i64,
    pub created_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    pub variables: serde_json::Map<String, Value>,
    pub tasks: Vec<Task>,
}

/// Starts a workflow and answers once it ends, or a task completes, or the wait runs out.
#[utoipa::path(post, path = "/api/workflow/execute/{name}/{version}", tag = "conductor",
    params(("name" = String, Path), ("version" = u32, Path), ExecuteParams), request_body = StartWorkflowRequest,
    security(("token" = ["submit"])),
    responses((status = 200, body = WorkflowRun), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn execute(
    State(state): State<AppState>,
    principal: Principal,
    Path((name, version)): Path<(String, u32)>,
    Query(q): Query<ExecuteParams>,
    Json(mut r): Json<StartWorkflowRequest>,
) -> Result<Json<WorkflowRun>, ApiError> {
    let wait = match q.wait_for_seconds {
        None => DEFAULT_WAIT,
        Some(s) => Duration::from_secs(s).min(MAX_WAIT),
    };
    r.name = name;
    r.version = Some(version);
    let created_by = principal.name.clone();
    let task = start_request(&state, principal, r).await?;
    let d = settled(&state, task, q.wait_until_task_ref.as_deref(), wait).await?;
    let def = state.store().get_workflow(&d.task.workflow, Some(d.task.workflow_version)).await.ok().flatten();
    let w = Workflow::new(&d.task, Some(&d.steps[..]), &d.steps, def.as_ref());
    Ok(Json(WorkflowRun {
        workflow_id: w.workflow_id,
        request_id: q.request_id,
        status: w.status,
        input: w.input,
        output: w.output,
        priority: w.priority,
        create_time: w.create_time,
        update_time: w.update_time,
        created_by,
        reason_for_incompletion: w.reason_for_incompletion,
        variables: w.variables,
        tasks: w.tasks,
    }))
}

/// The task once it has ended, or the step `until` names has been processed, or `wait` passed:
/// read again at each of its events.
async fn settled(state: &AppState, task: TaskId, until: Option<&str>, wait: Duration) -> Result<TaskDetail, ApiError> {
    let store = state.store();
    let done = |d: &TaskDetail| {
        d.task.state.is_terminal()
            || until.is_some_and(|r| d.steps.iter().any(|s| s.name == r && s.state == StepState::Processed))
    };
    let read =
        || async { store.get_task(task).await?.ok_or_else(|| ApiError::not_found(format!("workflow {task} is gone"))) };
    let filter = EventFilter { task_id: Some(task), ..EventFilter::default() };
    let mut events = state.engine.events(filter, 0, 100);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let d = read().await?;
        if done(&d) {
            return Ok(d);
        }
        match tokio::time::timeout_at(deadline, events.next_events()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return read().await,
        }
    }
}
