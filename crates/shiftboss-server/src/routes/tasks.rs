//! Tasks: submit (idempotent by key), read one with its steps and events, list with filters.

use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::limits::{self, DEFAULT_EVENTS, MAX_PAGE};
use crate::query::{Path, Query};
use crate::routes::jobs::parse_time;
use crate::state::AppState;
use crate::wire::{self, EventPage, Submitted, Task, TaskPage, TaskView};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use shiftboss_core::{TaskId, TaskState, Timestamp};
use shiftboss_store::{ListTasks, StoreError, TaskDetail, TaskEvents, TaskFilter};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(submit_task, list_tasks))
        .routes(routes!(submit_batch))
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
    let s = state.submit(to_store(req, &principal)?).await?;
    let status = if s.created { StatusCode::CREATED } else { StatusCode::OK };
    let location = format!("/v1/tasks/{}", s.task_id);
    let body = Submitted { id: s.task_id.to_string(), key, created: s.created };
    Ok((status, [(header::LOCATION, location)], Json(body)).into_response())
}

/// Which tasks: every filter given must match. Times are RFC 3339; each range takes its `from`
/// and leaves out its `to`.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FilterParams {
    /// Only tasks in this state.
    pub state: Option<String>,
    /// Only tasks of this workflow (any version).
    pub workflow: Option<String>,
    /// Only tasks whose key starts with this text.
    pub key_prefix: Option<String>,
    /// Submitted at or after this time.
    pub created_from: Option<String>,
    /// Submitted before this time.
    pub created_to: Option<String>,
    /// Last changed at or after this time.
    pub updated_from: Option<String>,
    /// Last changed before this time.
    pub updated_to: Option<String>,
}

impl FilterParams {
    /// The store's filter; a bad value is named (`status` answers it: 400 in a query, 422 in a body).
    pub fn filter(self, bad: fn(String) -> ApiError) -> Result<TaskFilter, ApiError> {
        let state = match self.state.as_deref() {
            None => None,
            Some(s) => Some(s.parse::<TaskState>().map_err(|e| bad(format!("state: {e}")))?),
        };
        let time = |what: &str, t: Option<String>| -> Result<Option<Timestamp>, ApiError> {
            t.map(|t| parse_time(&t).map_err(|e| bad(format!("{what}: {e}")))).transpose()
        };
        Ok(TaskFilter {
            correlation_id: None,
            state,
            workflow: self.workflow,
            key_prefix: self.key_prefix,
            created_from: time("created_from", self.created_from)?,
            created_to: time("created_to", self.created_to)?,
            updated_from: time("updated_from", self.updated_from)?,
            updated_to: time("updated_to", self.updated_to)?,
        })
    }
}

/// A task listing's query: the filter and the page. One struct, so that an unknown parameter
/// (a misspelt filter, which would match every task) is refused.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListParams {
    /// Only tasks in this state.
    state: Option<String>,
    /// Only tasks of this workflow (any version).
    workflow: Option<String>,
    /// Only tasks whose key starts with this text.
    key_prefix: Option<String>,
    /// Submitted at or after this time (RFC 3339).
    created_from: Option<String>,
    /// Submitted before this time (RFC 3339).
    created_to: Option<String>,
    /// Last changed at or after this time (RFC 3339).
    updated_from: Option<String>,
    /// Last changed before this time (RFC 3339).
    updated_to: Option<String>,
    /// Also tasks the archiver moved to history (they come with `archived: true`).
    #[serde(default)]
    archived: bool,
    /// The cursor from the previous page's `next`.
    before: Option<String>,
    /// At most this many (1 to 1000, default 50).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// Lists tasks, newest first, a page at a time.
#[utoipa::path(get, path = "/v1/tasks", tag = "tasks", params(ListParams),
    security(("token" = ["read"])),
    responses((status = 200, description = "A page of tasks", body = TaskPage), (status = 400, body = Problem)))]
async fn list_tasks(State(state): State<AppState>, Query(q): Query<ListParams>) -> Result<Json<TaskPage>, ApiError> {
    let f = FilterParams {
        state: q.state,
        workflow: q.workflow,
        key_prefix: q.key_prefix,
        created_from: q.created_from,
        created_to: q.created_to,
        updated_from: q.updated_from,
        updated_to: q.updated_to,
    };
    let limit = limits::page(q.limit)?;
    let before = match q.before.as_deref() {
        None => None,
        Some(c) => Some(wire::task_id(c).ok_or_else(|| ApiError::bad_request("before: not a cursor this API gave"))?),
    };
    let p =
        ListTasks { filter: f.filter(ApiError::bad_request)?, include_archived: q.archived, before, limit: limit + 1 };
    let mut tasks = state.store().list_tasks(p).await?;
    let more = tasks.len() > limit as usize;
    tasks.truncate(limit as usize);
    let next = if more { tasks.last().map(|t| t.id.to_string()) } else { None };
    Ok(Json(TaskPage { items: tasks.into_iter().map(Task::from).collect(), next }))
}

/// Tasks submitted together.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBatch {
    /// 1 to 1,000 tasks.
    tasks: Vec<wire::SubmitTask>,
}

/// What a batch submission did, in the order of the request's tasks.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchSubmitted {
    pub items: Vec<Submitted>,
}

/// Submits tasks in one transaction: all or none. Each is idempotent by its key as a single
/// submission is (an existing key with the same workflow and input comes back with
/// `created: false`); a key that exists with another workflow or input refuses the whole batch
/// (409), as does an invalid task (422, naming its index).
#[utoipa::path(post, path = "/v1/tasks/batch", tag = "tasks", request_body = SubmitBatch,
    security(("token" = ["submit"])),
    responses((status = 201, body = BatchSubmitted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn submit_batch(
    State(state): State<AppState>,
    principal: Principal,
    Json(b): Json<SubmitBatch>,
) -> Result<Response, ApiError> {
    if b.tasks.is_empty() || b.tasks.len() > limits::MAX_BATCH {
        return Err(ApiError::invalid(format!("tasks: give 1 to {} tasks", limits::MAX_BATCH)));
    }
    let keys: Vec<String> = b.tasks.iter().map(|t| t.key.clone()).collect();
    let tasks = b.tasks.into_iter().map(|t| to_store(t, &principal)).collect::<Result<_, _>>()?;
    let done = state.submit_many(tasks).await?;
    let items = done
        .into_iter()
        .zip(keys)
        .map(|(s, key)| Submitted { id: s.task_id.to_string(), key, created: s.created })
        .collect();
    Ok((StatusCode::CREATED, Json(BatchSubmitted { items })).into_response())
}

fn to_store(t: wire::SubmitTask, principal: &Principal) -> Result<shiftboss_store::SubmitTask, ApiError> {
    let notify = t
        .notify
        .as_ref()
        .map(wire::Webhook::to_target)
        .transpose()
        .map_err(|m| ApiError::invalid(format!("notify: {m}")))?;
    Ok(shiftboss_store::SubmitTask {
        correlation_id: None,
        domains: t.domains,
        key: t.key,
        workflow: t.workflow,
        version: t.version,
        input: t.input.unwrap_or_else(|| serde_json::json!({})),
        priority: t.priority.unwrap_or(0),
        actor: principal.name.clone(),
        notify,
    })
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct DetailParams {
    /// At most this many events in the answer (0 to 1000, default 100); page the rest.
    #[param(minimum = 0, maximum = 1000)]
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
    let detail = head(&state, id, events).await?.ok_or_else(|| no_task(&id.to_string()))?;
    Ok(Json(TaskView::new(detail, events)))
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
    let detail = head(&state, id, events).await?.ok_or_else(not_found)?;
    Ok(Json(TaskView::new(detail, events)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct EventParams {
    /// The cursor from the previous page's `next` (or the task's `events_next`).
    after: Option<String>,
    /// At most this many (1 to 1000, default 50).
    #[param(minimum = 1, maximum = 1000)]
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
    let limit = limits::page(q.limit)?;
    let after = match q.after.as_deref() {
        None => None,
        Some(c) => Some(wire::parse_id(c).ok_or_else(|| ApiError::bad_request("after: not a cursor this API gave"))?),
    };
    let task_id = wire::task_id(&id).ok_or_else(|| no_task(&id))?;
    let mut events = state.store().task_events(TaskEvents { task_id, after, limit: limit + 1 }).await?;
    if events.is_empty() && after.is_none() && head(&state, task_id, 0).await?.is_none() {
        return Err(no_task(&id));
    }
    let more = events.len() > limit as usize;
    events.truncate(limit as usize);
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

/// The task with its steps and its first `events` events (one more, so that the view knows
/// whether a next page exists), from the hot tables, else from history.
async fn head(state: &AppState, id: TaskId, events: usize) -> Result<Option<TaskDetail>, StoreError> {
    let store = state.store();
    let n = u32::try_from(events).unwrap_or(u32::MAX).saturating_add(1);
    if let Some(d) = store.get_task_head(id, false, n).await? {
        return Ok(Some(d));
    }
    store.get_task_head(id, true, n).await
}

/// The task's detail from the hot tables, else from history; whether it came from history.
pub async fn detail(state: &AppState, id: TaskId) -> Result<Option<(TaskDetail, bool)>, StoreError> {
    let store = state.store();
    if let Some(d) = store.get_task(id).await? {
        return Ok(Some((d, false)));
    }
    Ok(store.get_archived_task(id).await?.map(|d| (d, true)))
}
