//! Operator actions (P16), each with a reason; the actor in the event log is the token's name.
//! An action that does not fit the task's state is a 409 and changes nothing.

use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::Path;
use crate::state::AppState;
use crate::wire::{self, Acted, Reason, Rerun, Signal, Skip, StepActed};
use axum::extract::State;
use shiftboss_core::StepId;
use shiftboss_store::{OperateTask, ResubmitStep, TaskCommand};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(cancel))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(terminate))
        .routes(routes!(retry))
        .routes(routes!(compensate))
        .routes(routes!(rerun))
        .routes(routes!(skip))
        .routes(routes!(signal))
        .routes(routes!(resubmit_step))
}

async fn act(
    state: &AppState,
    principal: &Principal,
    id: &str,
    reason: String,
    command: TaskCommand,
) -> Result<Acted, ApiError> {
    let task_id = wire::task_id(id).ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
    let action = command.as_str();
    state.store().operate_task(OperateTask { task_id, actor: principal.name.clone(), reason, command }).await?;
    // Steps that the action made due (resume, retry, rerun) start at once in this process.
    state.engine.wake();
    let task = state.store().get_task(task_id).await?;
    let task_state = task.map(|d| d.task.state.as_str().to_owned()).unwrap_or_default();
    Ok(Acted { id: task_id.to_string(), action: action.to_owned(), state: task_state })
}

macro_rules! simple_action {
    ($name:ident, $path:literal, $command:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, tag = "operator", params(("id" = String, Path)), request_body = Reason,
            security(("token" = ["operate"])),
            responses((status = 200, body = Acted), (status = 404, body = Problem), (status = 409, body = Problem)))]
        async fn $name(
            State(state): State<AppState>,
            principal: Principal,
            Path(id): Path<String>,
            Json(r): Json<Reason>,
        ) -> Result<Json<Acted>, ApiError> {
            act(&state, &principal, &id, r.reason, $command).await.map(Json)
        }
    };
}

simple_action!(
    cancel,
    "/v1/tasks/{id}/cancel",
    TaskCommand::Cancel,
    "Cancels a task: its live steps are cancelled, and its completed steps compensated when its workflow says so."
);
simple_action!(
    pause,
    "/v1/tasks/{id}/pause",
    TaskCommand::Pause,
    "Pauses a task: no new step is scheduled or claimed until it is resumed; running steps finish."
);
simple_action!(resume, "/v1/tasks/{id}/resume", TaskCommand::Resume, "Resumes a paused task.");
simple_action!(
    terminate,
    "/v1/tasks/{id}/terminate",
    TaskCommand::Terminate,
    "Ends a task at once, without compensation."
);
simple_action!(retry, "/v1/tasks/{id}/retry", TaskCommand::Retry, "Runs a failed task's steps in Error again.");
simple_action!(
    compensate,
    "/v1/tasks/{id}/compensate",
    TaskCommand::Compensate,
    "Undoes a failed, cancelled or terminated top-level task that was not compensated: the compensations of its completed steps run, newest first, and it ends compensated."
);

/// Runs a task again from a step instance: it and every step started after it.
#[utoipa::path(post, path = "/v1/tasks/{id}/rerun", tag = "operator", params(("id" = String, Path)), request_body = Rerun,
    security(("token" = ["operate"])),
    responses((status = 200, body = Acted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn rerun(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(r): Json<Rerun>,
) -> Result<Json<Acted>, ApiError> {
    act(&state, &principal, &id, r.reason, TaskCommand::Rerun { from: r.from }).await.map(Json)
}

/// Records a step instance as processed with the given output, without running it.
#[utoipa::path(post, path = "/v1/tasks/{id}/skip", tag = "operator", params(("id" = String, Path)), request_body = Skip,
    security(("token" = ["operate"])),
    responses((status = 200, body = Acted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn skip(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(r): Json<Skip>,
) -> Result<Json<Acted>, ApiError> {
    let command = TaskCommand::Skip { step: r.step, output: r.output };
    act(&state, &principal, &id, r.reason, command).await.map(Json)
}

/// Ends a wait: the wait step of this name, or a wait for a signal of this name.
#[utoipa::path(post, path = "/v1/tasks/{id}/signal", tag = "operator", params(("id" = String, Path)), request_body = Signal,
    security(("token" = ["operate"])),
    responses((status = 200, body = Acted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn signal(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(r): Json<Signal>,
) -> Result<Json<Acted>, ApiError> {
    let command = TaskCommand::Signal { name: r.name, payload: r.payload };
    act(&state, &principal, &id, r.reason, command).await.map(Json)
}

/// Sends a step in Error back to Pending with its failure count reset.
#[utoipa::path(post, path = "/v1/steps/{id}/resubmit", tag = "operator", params(("id" = String, Path)), request_body = Reason,
    security(("token" = ["operate"])),
    responses((status = 200, body = StepActed), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn resubmit_step(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(r): Json<Reason>,
) -> Result<Json<StepActed>, ApiError> {
    let step_id = wire::parse_id(&id).map(StepId).ok_or_else(|| ApiError::not_found(format!("no step {id}")))?;
    state.store().resubmit_step(ResubmitStep { step_id, actor: principal.name.clone(), reason: r.reason }).await?;
    state.engine.wake();
    Ok(Json(StepActed { id: step_id.to_string(), action: "resubmit".into() }))
}
