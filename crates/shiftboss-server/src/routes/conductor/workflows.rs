//! Conductor's workflow routes over shiftboss tasks: start (the engine's submission, idempotent
//! by key), read (Conductor's Workflow with its tasks), search, and the operator actions, each
//! through the same operator path as `/v1/tasks/{id}/...` with the token's name as the actor.

use super::wire::{self, RerunWorkflowRequest, SearchResult, SkipTaskRequest, StartWorkflowRequest, Workflow};
use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::{self, Json};
use crate::query::{Path, Query};
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use shiftboss_core::{TaskId, TaskState};
use shiftboss_store::{ArchiveTask, ListTasks, OperateTask, SubmitTask, TaskCommand, TaskFilter};
use std::collections::BTreeMap;
use utoipa::IntoParams;

fn text(s: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], s).into_response()
}

fn workflow_id(id: &str) -> Result<TaskId, ApiError> {
    crate::wire::task_id(id).ok_or_else(|| ApiError::not_found(format!("no workflow {id}")))
}

/// Starts a workflow: a shiftboss task whose key is the `idempotencyKey` (a new UUID when
/// absent). Starting again with the same key and input answers the same id. Answers the
/// workflow id as text.
#[utoipa::path(post, path = "/api/workflow", tag = "conductor", request_body = StartWorkflowRequest,
    security(("token" = ["submit"])),
    responses((status = 200, description = "The workflow id", content_type = "text/plain", body = String),
        (status = 409, description = "The idempotency key exists with another workflow or input (or idempotencyStrategy FAIL)", body = Problem),
        (status = 422, description = "Unknown workflow, invalid input, taskToDomain or an inline workflowDef", body = Problem)))]
pub async fn start(
    State(state): State<AppState>,
    principal: Principal,
    Json(r): Json<StartWorkflowRequest>,
) -> Result<Response, ApiError> {
    let task = start_request(&state, principal, r).await?;
    Ok(text(task.to_string()))
}

/// Starts the workflow a StartWorkflowRequest names (`POST /api/workflow` and start-and-wait).
pub(super) async fn start_request(
    state: &AppState,
    principal: Principal,
    r: StartWorkflowRequest,
) -> Result<TaskId, ApiError> {
    if r.workflow_def.is_some() {
        return Err(ApiError::invalid("workflowDef: register the definition first (POST /api/metadata/workflow)"));
    }
    let domains = task_domains(r.task_to_domain.unwrap_or_default())?;
    if r.external_input_payload_storage_path.is_some() {
        return Err(ApiError::invalid("externalInputPayloadStoragePath: external payload storage is not supported"));
    }
    let fail_if_exists = match r.idempotency_strategy.as_deref() {
        None | Some("RETURN_EXISTING") => false,
        Some("FAIL") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!("idempotencyStrategy: {other:?} is not FAIL or RETURN_EXISTING")));
        }
    };
    let key = match r.idempotency_key.filter(|k| !k.is_empty()) {
        Some(k) => k,
        None => uuid::Uuid::new_v4().to_string(),
    };
    if fail_if_exists && state.store().find_task_by_key(&key).await?.is_some() {
        return Err(ApiError::conflict(format!("idempotencyKey {key:?}: a workflow was started with it")));
    }
    let task = SubmitTask {
        correlation_id: r.correlation_id.filter(|c| !c.is_empty()),
        domains,
        key,
        workflow: r.name,
        version: r.version,
        input: r.input.unwrap_or_else(|| json!({})),
        priority: r.priority.unwrap_or(0),
        actor: principal.name,
        notify: None,
    };
    Ok(state.submit(task).await?.task_id)
}

/// A start request's taskToDomain as the task's domains: one domain (or NO_DOMAIN) per task type or
/// `*`. Conductor's list of domains tried in turn by which has live workers is not kept.
fn task_domains(map: BTreeMap<String, String>) -> Result<shiftboss_store::TaskDomains, ApiError> {
    for (task_type, domain) in &map {
        if domain.contains(',') {
            return Err(ApiError::invalid(format!(
                "taskToDomain.{task_type}: {domain:?} lists domains; shiftboss takes one domain per task type"
            )));
        }
    }
    Ok(map)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct StartParams {
    /// The version; the newest when absent.
    pub version: Option<u32>,
    /// Kept with the workflow; its lookups find it by this.
    pub correlation_id: Option<String>,
    pub priority: Option<i32>,
}

/// Starts a workflow of this name with the body as its input; answers the id as text.
#[utoipa::path(post, path = "/api/workflow/{workflowId}", tag = "conductor",
    params(("workflowId" = String, Path, description = "The workflow's name (Conductor's `/workflow/{name}`: one path with the read and the terminate)"), StartParams),
    request_body(content = Object, description = "The workflow's input", content_type = "application/json"),
    security(("token" = ["submit"])),
    responses((status = 200, description = "The workflow id", content_type = "text/plain", body = String),
        (status = 422, body = Problem)))]
pub async fn start_by_name(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(q): Query<StartParams>,
    Json(input): Json<Value>,
) -> Result<Response, ApiError> {
    let task = SubmitTask {
        correlation_id: q.correlation_id.filter(|c| !c.is_empty()),
        domains: Default::default(),
        key: uuid::Uuid::new_v4().to_string(),
        workflow: name,
        version: q.version,
        input,
        priority: q.priority.unwrap_or(0),
        actor: principal.name,
        notify: None,
    };
    let s = state.submit(task).await?;
    Ok(text(s.task_id.to_string()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct GetParams {
    /// With its tasks (the default).
    pub include_tasks: Option<bool>,
}

/// A workflow (a shiftboss task) as Conductor's Workflow, with its tasks (its step rows).
#[utoipa::path(get, path = "/api/workflow/{workflowId}", tag = "conductor",
    params(("workflowId" = String, Path), GetParams), security(("token" = ["read"])),
    responses((status = 200, body = Workflow), (status = 404, body = Problem)))]
pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<GetParams>,
) -> Result<Json<Workflow>, ApiError> {
    let task_id = workflow_id(&id)?;
    let (d, _) = crate::routes::tasks::detail(&state, task_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no workflow {id}")))?;
    let with_tasks = q.include_tasks.unwrap_or(true);
    // The definition tells optional steps and the initial variables; a workflow still reads
    // without it (a definition purged since).
    let def = state.store().get_workflow(&d.task.workflow, Some(d.task.workflow_version)).await.ok().flatten();
    Ok(Json(Workflow::new(&d.task, with_tasks.then_some(&d.steps[..]), &d.steps, def.as_ref())))
}

pub(super) async fn act(
    state: &AppState,
    principal: &Principal,
    id: &str,
    reason: String,
    command: TaskCommand,
) -> Result<(), ApiError> {
    let task_id = workflow_id(id)?;
    let reason = if reason.is_empty() { format!("Conductor API: {}", command.as_str()) } else { reason };
    state.store().operate_task(OperateTask { task_id, actor: principal.name.clone(), reason, command }).await?;
    // Steps the action made due start at once in this process.
    state.engine.wake();
    Ok(())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TerminateParams {
    /// Why, for the task's events.
    pub reason: Option<String>,
}

/// Terminates a workflow: its live steps are cancelled, nothing is compensated.
#[utoipa::path(delete, path = "/api/workflow/{workflowId}", tag = "conductor",
    params(("workflowId" = String, Path), TerminateParams), security(("token" = ["operate"])),
    responses((status = 200, description = "Terminated"), (status = 404, body = Problem),
        (status = 409, description = "The workflow has ended", body = Problem)))]
pub async fn terminate(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Query(q): Query<TerminateParams>,
) -> Result<StatusCode, ApiError> {
    act(&state, &principal, &id, q.reason.unwrap_or_default(), TaskCommand::Terminate).await.map(|()| StatusCode::OK)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RemoveParams {
    /// Accepted for Conductor's SDKs: the workflow always moves to history (the archive's
    /// retention deletes it later), so that what ran can still be read.
    #[allow(dead_code)]
    #[serde(rename = "archiveWorkflow")]
    pub archive_workflow: Option<String>,
}

/// Removes a finished workflow from the live tables now: it moves, with its sub-workflows, to
/// history, as the archiver would move it later (still read by `GET /api/workflow/{id}`). A
/// workflow that runs is refused (409): terminate it first.
#[utoipa::path(delete, path = "/api/workflow/{workflowId}/remove", tag = "conductor",
    params(("workflowId" = String, Path), RemoveParams), security(("token" = ["operate"])),
    responses((status = 200, description = "Moved to history"), (status = 404, body = Problem),
        (status = 409, description = "It runs, or it is a sub-workflow (it moves with its parent)", body = Problem)))]
pub async fn remove(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Query(_q): Query<RemoveParams>,
) -> Result<StatusCode, ApiError> {
    let task_id = workflow_id(&id)?;
    state.store().archive_task(ArchiveTask { task_id, actor: principal.name.clone() }).await?;
    Ok(StatusCode::OK)
}

macro_rules! plain_action {
    ($name:ident, $method:ident, $path:literal, $command:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path($method, path = $path, tag = "conductor", params(("workflowId" = String, Path)),
                    security(("token" = ["operate"])),
                    responses((status = 200, description = "Done"), (status = 404, body = Problem),
                        (status = 409, description = "The workflow's state does not allow it", body = Problem)))]
        pub async fn $name(
            State(state): State<AppState>,
            principal: Principal,
            Path(id): Path<String>,
        ) -> Result<StatusCode, ApiError> {
            act(&state, &principal, &id, String::new(), $command).await.map(|()| StatusCode::OK)
        }
    };
}

plain_action!(
    pause,
    put,
    "/api/workflow/{workflowId}/pause",
    TaskCommand::Pause,
    "Pauses a workflow: nothing new is scheduled or claimed until it is resumed."
);
plain_action!(resume, put, "/api/workflow/{workflowId}/resume", TaskCommand::Resume, "Resumes a paused workflow.");
plain_action!(
    retry,
    post,
    "/api/workflow/{workflowId}/retry",
    TaskCommand::Retry,
    "Retries a failed workflow: its failed tasks run again."
);

/// The name of the step a rerun starts from: the one a Conductor task id names, else the first.
pub(super) async fn first_or(state: &AppState, id: &str, from: Option<&str>) -> Result<String, ApiError> {
    let task_id = workflow_id(id)?;
    let d = state.store().get_task(task_id).await?.ok_or_else(|| ApiError::not_found(format!("no workflow {id}")))?;
    let step = match from {
        None => d.steps.first(),
        Some(t) => {
            let (step_id, _) = wire::parse_task_id(t)
                .ok_or_else(|| ApiError::invalid(format!("reRunFromTaskId: {t:?} is not a task of this workflow")))?;
            d.steps.iter().find(|s| s.id == step_id)
        }
    };
    step.map(|s| s.name.clone()).ok_or_else(|| ApiError::invalid("reRunFromTaskId: no such task in this workflow"))
}

/// Restarts a workflow from its first task, with the input it was started with.
#[utoipa::path(post, path = "/api/workflow/{workflowId}/restart", tag = "conductor",
    params(("workflowId" = String, Path)), security(("token" = ["operate"])),
    responses((status = 200, description = "Restarted"), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
pub async fn restart(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let from = first_or(&state, &id, None).await?;
    act(&state, &principal, &id, String::new(), TaskCommand::Rerun { from }).await.map(|()| StatusCode::OK)
}

/// Runs a workflow again from a task (`reRunFromTaskId`) or from its first; answers its id.
/// A new input (`workflowInput`, `taskInput`) is refused: a shiftboss task keeps its input.
#[utoipa::path(post, path = "/api/workflow/{workflowId}/rerun", tag = "conductor",
    params(("workflowId" = String, Path)), request_body = RerunWorkflowRequest, security(("token" = ["operate"])),
    responses((status = 200, description = "The workflow id", content_type = "text/plain", body = String),
        (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn rerun(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(r): Json<RerunWorkflowRequest>,
) -> Result<Response, ApiError> {
    let non_empty = |v: &Option<Value>| v.as_ref().is_some_and(|v| !v.is_null() && v != &json!({}));
    if non_empty(&r.workflow_input) || non_empty(&r.task_input) {
        return Err(ApiError::invalid("workflowInput, taskInput: a rerun keeps the workflow's input"));
    }
    let from = first_or(&state, &id, r.re_run_from_task_id.as_deref()).await?;
    act(&state, &principal, &id, String::new(), TaskCommand::Rerun { from }).await?;
    Ok(text(id))
}

/// Skips a task by its reference name: it counts as completed with `taskOutput`.
#[utoipa::path(put, path = "/api/workflow/{workflowId}/skiptask/{taskReferenceName}", tag = "conductor",
    params(("workflowId" = String, Path), ("taskReferenceName" = String, Path)),
    request_body(content = SkipTaskRequest, description = "Optional", content_type = "application/json"),
    security(("token" = ["operate"])),
    responses((status = 200, description = "Skipped"), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub async fn skip(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, step)): Path<(String, String)>,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let bytes = json::body_bytes(req, &state).await?;
    let r: SkipTaskRequest =
        if bytes.iter().all(u8::is_ascii_whitespace) { SkipTaskRequest::default() } else { json::parse(&bytes)? };
    let output = r.task_output.unwrap_or_else(|| json!({}));
    act(&state, &principal, &id, String::new(), TaskCommand::Skip { step, output }).await.map(|()| StatusCode::OK)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct SearchParams {
    /// How many results to pass over (start + size at most 1,000).
    pub start: Option<u32>,
    /// At most this many results (default 100).
    pub size: Option<u32>,
    /// `workflowType = NAME`, `status = RUNNING`, joined with AND.
    pub query: Option<String>,
    /// Only `*` (any).
    pub free_text: Option<String>,
    /// Ignored: newest first.
    #[allow(dead_code)]
    pub sort: Option<String>,
}

/// Searches workflows, newest first: `query` takes `workflowType` and `status` terms joined
/// with AND; `totalHits` counts the hits up to this page, plus one when more follow.
#[utoipa::path(get, path = "/api/workflow/search", tag = "conductor", params(SearchParams),
    security(("token" = ["read"])),
    responses((status = 200, body = SearchResult), (status = 400, body = Problem)))]
pub async fn search(
    State(state): State<AppState>,
    Query(q): Query<SearchParams>,
) -> Result<Json<SearchResult>, ApiError> {
    if q.free_text.as_deref().is_some_and(|t| !t.is_empty() && t != "*") {
        return Err(ApiError::bad_request("freeText: only * is supported"));
    }
    let start = q.start.unwrap_or(0);
    let size = q.size.unwrap_or(100);
    if size == 0 || start.saturating_add(size) > crate::limits::MAX_PAGE {
        return Err(ApiError::bad_request(format!("start + size: 1 to {}", crate::limits::MAX_PAGE)));
    }
    let (workflow, states, correlation_id) = parse_query(q.query.as_deref().unwrap_or(""))?;
    // One state per listing: a status that is two shiftboss states is read as two listings.
    let mut hits = Vec::new();
    for st in states.unwrap_or(&[]).iter().map(|s| Some(*s)).chain(states.is_none().then_some(None)) {
        let filter = TaskFilter {
            state: st,
            workflow: workflow.clone(),
            correlation_id: correlation_id.clone(),
            ..TaskFilter::default()
        };
        let p = ListTasks { filter, include_archived: false, before: None, limit: start + size + 1 };
        hits.extend(state.store().list_tasks(p).await?);
    }
    hits.sort_by_key(|t| std::cmp::Reverse(t.id));
    let more = hits.len() > (start + size) as usize;
    let total = (hits.len().min((start + size) as usize) + usize::from(more)) as u64;
    let results = hits.iter().skip(start as usize).take(size as usize).map(wire::WorkflowSummary::from).collect();
    Ok(Json(SearchResult { total_hits: total, results }))
}

/// What a search's query asks: a workflow, states, a correlation id.
type Query3 = (Option<String>, Option<&'static [TaskState]>, Option<String>);

/// Reads `workflowType = X AND status = Y AND correlationId = Z` (values optionally quoted).
fn parse_query(q: &str) -> Result<Query3, ApiError> {
    let (mut workflow, mut states, mut correlation) = (None, None, None);
    for term in q.split(" AND ").map(str::trim).filter(|t| !t.is_empty()) {
        let (field, value) = term
            .split_once('=')
            .ok_or_else(|| ApiError::bad_request(format!("query: {term:?} is not field = value")))?;
        let value = value.trim().trim_matches(|c| c == '\'' || c == '"').to_owned();
        match field.trim() {
            "workflowType" => workflow = Some(value),
            "status" => {
                states = Some(
                    wire::task_states(&value)
                        .ok_or_else(|| ApiError::bad_request(format!("query: no workflow status {value:?}")))?,
                )
            }
            "correlationId" => correlation = Some(value),
            other => {
                return Err(ApiError::bad_request(format!(
                    "query: {other:?}: only workflowType, status and correlationId"
                )));
            }
        }
    }
    Ok((workflow, states, correlation))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct CorrelatedParams {
    /// Ended workflows too (default false: running and paused ones only). `true` or `false`, in
    /// any case (conductor-python sends `True`).
    #[param(value_type = Option<bool>)]
    pub include_closed: Option<String>,
    /// With their tasks (default false), as `includeClosed`.
    #[param(value_type = Option<bool>)]
    pub include_tasks: Option<String>,
}

impl CorrelatedParams {
    fn flag(v: &Option<String>, name: &str) -> Result<bool, ApiError> {
        match v.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!("{name}: {other:?} is not true or false"))),
        }
    }
}

/// The most workflows one correlation id answers, newest first.
const CORRELATED_MAX: u32 = 1000;

/// The live workflows of this name with this correlation id, newest first.
async fn correlated_of(
    state: &AppState,
    name: &str,
    correlation_id: &str,
    q: &CorrelatedParams,
) -> Result<Vec<Workflow>, ApiError> {
    let filter = TaskFilter {
        workflow: Some(name.to_owned()),
        correlation_id: Some(correlation_id.to_owned()),
        ..TaskFilter::default()
    };
    let p = ListTasks { filter, include_archived: false, before: None, limit: CORRELATED_MAX };
    let closed = CorrelatedParams::flag(&q.include_closed, "includeClosed")?;
    let with_tasks = CorrelatedParams::flag(&q.include_tasks, "includeTasks")?;
    let mut out = Vec::new();
    for t in state.store().list_tasks(p).await?.into_iter().filter(|t| closed || !t.state.is_terminal()) {
        if with_tasks {
            if let Some((d, _)) = crate::routes::tasks::detail(state, t.id).await? {
                let def = state.store().get_workflow(&t.workflow, Some(t.workflow_version)).await.ok().flatten();
                out.push(Workflow::new(&d.task, Some(&d.steps[..]), &d.steps, def.as_ref()));
            }
        } else {
            out.push(Workflow::new(&t, None, &[], None));
        }
    }
    Ok(out)
}

/// The workflows of a name started with a correlation id, newest first (at most 1,000).
#[utoipa::path(get, path = "/api/workflow/{name}/correlated/{correlationId}", tag = "conductor",
    params(("name" = String, Path), ("correlationId" = String, Path), CorrelatedParams),
    security(("token" = ["read"])),
    responses((status = 200, body = Vec<Workflow>), (status = 400, body = Problem)))]
pub async fn correlated(
    State(state): State<AppState>,
    Path((name, correlation_id)): Path<(String, String)>,
    Query(q): Query<CorrelatedParams>,
) -> Result<Json<Vec<Workflow>>, ApiError> {
    Ok(Json(correlated_of(&state, &name, &correlation_id, &q).await?))
}

/// Conductor's CorrelationIdsSearchRequest.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CorrelationIdsSearchRequest {
    pub correlation_ids: Vec<String>,
    pub workflow_names: Vec<String>,
}

/// For each correlation id, the workflows of every name listed that carry it (at most 100 ids
/// times names).
#[utoipa::path(post, path = "/api/workflow/correlated/batch", tag = "conductor", params(CorrelatedParams),
    request_body = CorrelationIdsSearchRequest, security(("token" = ["read"])),
    responses((status = 200, body = BTreeMap<String, Vec<Workflow>>), (status = 400, body = Problem),
        (status = 422, body = Problem)))]
pub async fn correlated_batch(
    State(state): State<AppState>,
    Query(q): Query<CorrelatedParams>,
    Json(r): Json<CorrelationIdsSearchRequest>,
) -> Result<Json<BTreeMap<String, Vec<Workflow>>>, ApiError> {
    if r.correlation_ids.len().saturating_mul(r.workflow_names.len()) > 100 {
        return Err(ApiError::invalid("at most 100 correlation ids times workflow names at once"));
    }
    let mut out: BTreeMap<String, Vec<Workflow>> = BTreeMap::new();
    for id in &r.correlation_ids {
        let mut found = Vec::new();
        for name in &r.workflow_names {
            found.extend(correlated_of(&state, name, id, &q).await?);
        }
        out.insert(id.clone(), found);
    }
    Ok(Json(out))
}

/// The workflows of a name for each correlation id listed (at most 100 ids).
#[utoipa::path(post, path = "/api/workflow/{name}/correlated", tag = "conductor",
    params(("name" = String, Path), CorrelatedParams), request_body(content = Vec<String>, description = "Correlation ids"),
    security(("token" = ["read"])),
    responses((status = 200, body = BTreeMap<String, Vec<Workflow>>), (status = 400, body = Problem),
        (status = 422, body = Problem)))]
pub async fn correlated_many(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<CorrelatedParams>,
    Json(ids): Json<Vec<String>>,
) -> Result<Json<BTreeMap<String, Vec<Workflow>>>, ApiError> {
    if ids.len() > 100 {
        return Err(ApiError::invalid(format!("at most 100 correlation ids at once; {} given", ids.len())));
    }
    let mut out = BTreeMap::new();
    for id in ids {
        let found = correlated_of(&state, &name, &id, &q).await?;
        out.insert(id, found);
    }
    Ok(Json(out))
}
