//! Tasks: submit (idempotent by key), read one with its steps and events, list with filters.

use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::limits::{self, DEFAULT_EVENTS, MAX_PAGE};
use crate::query::{Path, Query};
use crate::state::AppState;
use crate::wire::{self, EventPage, Submitted, Task, TaskPage, TaskView};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shiftboss_core::{TaskId, TaskState};
use shiftboss_store::{ListTasks, StoreError, TaskDetail};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(submit_task, list_tasks))
        .routes(routes!(get_task))
        .routes(routes!(get_task_by_key))
        .routes(routes!(task_events))
}

/// Submits a task. The same key with the same workflow and input gives back the existing task
/// (200, `created: false`); with another workflow or input, 409.
#[utoipa::path(post, path = "/v1/tasks", tag = "tasks", request_body = wire::SubmitTask,
    security(("token" = ["submit"])),
    responses(
        (status = 201, description = "Submitted", body = Submitted),
        (status = 200, description = "The key existed with the same workflow and input: that task", body = Submitted),
        (status = 409, description = "The key exists with another workflow or input", body = Problem),
        (status = 422, description = "Invalid input or unknown workflow", body = Problem),
    ))]
async fn submit_task(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<wire::SubmitTask>,
) -> Result<Response, ApiError> {
    let key = req.key.clone();
    let task = shiftboss_store::SubmitTask {
        key: req.key,
        workflow: req.workflow,
        version: req.version,
        input: req.input.unwrap_or_else(|| serde_json::json!({})),
        priority: req.priority.unwrap_or(0),
        actor: principal.name.clone(),
    };
    let s = state.engine.submit(task).await?;
    let status = if s.created { StatusCode::CREATED } else { StatusCode::OK };
    let location = format!("/v1/tasks/{}", s.task_id);
    let body = Submitted { id: s.task_id.to_string(), key, created: s.created };
    Ok((status, [(header::LOCATION, location)], Json(body)).into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListParams {
    /// Only tasks in this state.
    state: Option<String>,
    /// Only tasks of this workflow.
    workflow: Option<String>,
    /// The cursor from the previous page's `next`.
    before: Option<String>,
    /// At most this many (1 to 1000, default 50).
    limit: Option<u32>,
}

/// Lists tasks, newest first, a page at a time.
#[utoipa::path(get, path = "/v1/tasks", tag = "tasks", params(ListParams),
    security(("token" = ["read"])),
    responses((status = 200, description = "A page of tasks", body = TaskPage), (status = 400, body = Problem)))]
async fn list_tasks(State(state): State<AppState>, Query(q): Query<ListParams>) -> Result<Json<TaskPage>, ApiError> {
    let limit = limits::page(q.limit)?;
    let task_state = match q.state.as_deref() {
        None => None,
        Some(s) => Some(s.parse::<TaskState>().map_err(|e| ApiError::bad_request(format!("state: {e}")))?),
    };
    let before = match q.before.as_deref() {
        None => None,
        Some(c) => Some(wire::task_id(c).ok_or_else(|| ApiError::bad_request("before: not a cursor this API gave"))?),
    };
    let p = ListTasks { state: task_state, workflow: q.workflow, before, limit: limit + 1 };
    let mut tasks = state.store().list_tasks(p).await?;
    let more = tasks.len() > limit as usize;
    tasks.truncate(limit as usize);
    let next = if more { tasks.last().map(|t| t.id.to_string()) } else { None };
    Ok(Json(TaskPage { items: tasks.into_iter().map(Task::from).collect(), next }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct DetailParams {
    /// At most this many events in the answer (0 to 1000, default 100); page the rest.
    events_limit: Option<u32>,
}

/// A task with its steps and its first events: from the hot tables, or from history.
#[utoipa::path(get, path = "/v1/tasks/{id}", tag = "tasks", params(("id" = String, Path), DetailParams),
    security(("token" = ["read"])),
    responses((status = 200, body = TaskView), (status = 404, body = Problem)))]
async fn get_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<DetailParams>,
) -> Result<Json<TaskView>, ApiError> {
    let events = events_limit(q.events_limit)?;
    let id = wire::task_id(&id).ok_or_else(|| no_task(&id))?;
    let (detail, archived) = detail(&state, id).await?.ok_or_else(|| no_task(&id.to_string()))?;
    Ok(Json(TaskView::new(detail, archived, events)))
}

/// A task named by the application's key.
#[utoipa::path(get, path = "/v1/tasks/by-key/{key}", tag = "tasks", params(("key" = String, Path), DetailParams),
    security(("token" = ["read"])),
    responses((status = 200, body = TaskView), (status = 404, body = Problem)))]
async fn get_task_by_key(
    State(state): State<AppState>,
    Path(key): Path<String>,
    Query(q): Query<DetailParams>,
) -> Result<Json<TaskView>, ApiError> {
    let events = events_limit(q.events_limit)?;
    let store = state.store();
    let id = match store.find_task_by_key(&key).await? {
        Some(t) => Some(t.id),
        None => store.find_archived_task_by_key(&key).await?.map(|t| t.id),
    };
    let not_found = || ApiError::not_found(format!("no task with key {key:?}"));
    let id = id.ok_or_else(not_found)?;
    let (detail, archived) = detail(&state, id).await?.ok_or_else(not_found)?;
    Ok(Json(TaskView::new(detail, archived, events)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct EventParams {
    /// The cursor from the previous page's `next` (or the task's `events_next`).
    after: Option<String>,
    /// At most this many (1 to 1000, default 50).
    limit: Option<u32>,
}

/// A task's events, oldest first, a page at a time.
#[utoipa::path(get, path = "/v1/tasks/{id}/events", tag = "tasks", params(("id" = String, Path), EventParams),
    security(("token" = ["read"])),
    responses((status = 200, body = EventPage), (status = 404, body = Problem)))]
async fn task_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<EventParams>,
) -> Result<Json<EventPage>, ApiError> {
    let limit = limits::page(q.limit)? as usize;
    let after = match q.after.as_deref() {
        None => 0,
        Some(c) => wire::parse_id(c).ok_or_else(|| ApiError::bad_request("after: not a cursor this API gave"))?,
    };
    let id = wire::task_id(&id).ok_or_else(|| no_task(&id))?;
    let (detail, _) = detail(&state, id).await?.ok_or_else(|| no_task(&id.to_string()))?;
    let mut events: Vec<_> = detail.events.into_iter().filter(|e| e.id > after).take(limit + 1).collect();
    let more = events.len() > limit;
    events.truncate(limit);
    let next = if more { events.last().map(|e| e.id.to_string()) } else { None };
    Ok(Json(EventPage { items: events.into_iter().map(wire::Event::from).collect(), next }))
}

fn events_limit(n: Option<u32>) -> Result<usize, ApiError> {
    match n.unwrap_or(DEFAULT_EVENTS) {
        n if n > MAX_PAGE => Err(ApiError::bad_request(format!("events_limit: at most {MAX_PAGE}"))),
        n => Ok(n as usize),
    }
}

fn no_task(id: &str) -> ApiError {
    ApiError::not_found(format!("no task {id}"))
}

/// The task's detail from the hot tables, else from history; whether it came from history.
pub async fn detail(state: &AppState, id: TaskId) -> Result<Option<(TaskDetail, bool)>, StoreError> {
    let store = state.store();
    if let Some(d) = store.get_task(id).await? {
        return Ok(Some((d, false)));
    }
    Ok(store.get_archived_task(id).await?.map(|d| (d, true)))
}
