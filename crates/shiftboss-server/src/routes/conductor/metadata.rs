//! Conductor's metadata routes: workflow definitions (Conductor's WorkflowDef, converted by the
//! importer `shiftboss-conductor` and registered as shiftboss definitions, immutable per version)
//! and task definitions (applied to the workflow definitions registered after them: retries,
//! timeouts; see docs/conductor-api.md for what is lost). Task definitions, and the Conductor
//! document each workflow version was registered from, are the store's documents: every serve
//! process of a deployment answers the same, and a restart forgets nothing.

use crate::error::{ApiError, Problem};
use crate::json::{self, Json};
use crate::query::{Path, Query};
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use shiftboss_core::workflow::{StepDef, StepKind, WorkflowDef};
use shiftboss_store::DocumentKind;
use shiftboss_store::documents::MAX_DOCUMENTS_LISTED;
use std::collections::HashMap;
use utoipa::IntoParams;

/// The most definitions one listing reads.
const MAX_LISTED: usize = 1_000;

/// The name a workflow version's Conductor document is kept under.
fn source_name(name: &str, version: u32) -> String {
    format!("{name}:{version}")
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RegisterParams {
    /// Accepted for Conductor's SDKs; a version's content never changes in shiftboss (the same
    /// content again is accepted, other content is a 409).
    #[allow(dead_code)]
    pub overwrite: Option<String>,
}

/// Registers one Conductor WorkflowDef, with the task definitions registered before it.
#[utoipa::path(post, path = "/api/metadata/workflow", tag = "conductor", params(RegisterParams),
    request_body(content = Object, description = "Conductor's WorkflowDef", content_type = "application/json"),
    security(("token" = ["admin"])),
    responses((status = 200, description = "Registered, or registered before with the same content"),
        (status = 409, description = "This name and version exist with other content", body = Problem),
        (status = 422, description = "Not a definition shiftboss can run", body = Problem)))]
pub async fn register_workflows(
    State(state): State<AppState>,
    Query(_q): Query<RegisterParams>,
    req: Request,
) -> Result<Response, ApiError> {
    let v: Value = json::parse(&json::body_bytes(req, &state).await?)?;
    register(&state, v).await?;
    Ok(StatusCode::OK.into_response())
}

/// Registers each of a list of Conductor WorkflowDefs (Conductor's update): a version that
/// exists with the same content is left as it is; with other content, 409.
#[utoipa::path(put, path = "/api/metadata/workflow", tag = "conductor", params(RegisterParams),
    request_body(content = Vec<Object>, description = "Conductor WorkflowDefs", content_type = "application/json"),
    security(("token" = ["admin"])),
    responses((status = 200, description = "Registered"), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn update_workflows(
    State(state): State<AppState>,
    Query(_q): Query<RegisterParams>,
    req: Request,
) -> Result<Response, ApiError> {
    let v: Value = json::parse(&json::body_bytes(req, &state).await?)?;
    let Value::Array(defs) = v else { return Err(ApiError::invalid("send a JSON array of WorkflowDefs")) };
    for (i, d) in defs.into_iter().enumerate() {
        register(&state, d).await.map_err(|e| ApiError { detail: format!("[{i}]: {}", e.detail), ..e })?;
    }
    Ok(StatusCode::OK.into_response())
}

async fn register(state: &AppState, doc: Value) -> Result<(), ApiError> {
    if !doc.is_object() {
        return Err(ApiError::invalid("send a WorkflowDef object"));
    }
    let text = doc.to_string();
    let kept = state.store().list_documents(DocumentKind::TaskDef).await?;
    let task_defs = Value::Array(kept.into_iter().map(|(_, d)| d).collect()).to_string();
    let import = shiftboss_conductor::from_conductor_with_tasks(&text, &[task_defs.as_str()])
        .map_err(|e| ApiError::invalid(format!("not a Conductor definition shiftboss can run: {e}")))?;
    let def = import.workflow;
    // Sub-workflows given inline go first: the workflow names them.
    for sub in &import.sub_workflows {
        state.engine.check_workflow(sub)?;
    }
    state.engine.check_workflow(&def)?;
    for sub in &import.sub_workflows {
        state.engine.register_workflow(sub).await?;
    }
    state.engine.register_workflow(&def).await?;
    for n in &import.notes {
        tracing::info!(workflow = %def.name, version = def.version, note = %n, "Conductor definition imported with a note");
    }
    // After the definition: should this write fail, the definition is answered rendered from
    // the shiftboss definition, as one registered as YAML is.
    state.store().put_documents(DocumentKind::WorkflowSource, vec![(source_name(&def.name, def.version), doc)]).await?;
    Ok(())
}

/// Every workflow definition, every version, as Conductor WorkflowDefs.
#[utoipa::path(get, path = "/api/metadata/workflow", tag = "conductor", security(("token" = ["read"])),
    responses((status = 200, body = Vec<Object>)))]
pub async fn list_workflows(State(state): State<AppState>) -> Result<Json<Vec<Value>>, ApiError> {
    let all = state.store().list_workflows().await?;
    let sources: HashMap<String, Value> =
        state.store().list_documents(DocumentKind::WorkflowSource).await?.into_iter().collect();
    let mut out = Vec::new();
    for w in all.into_iter().take(MAX_LISTED) {
        match sources.get(&source_name(&w.name, w.version)) {
            Some(doc) => out.push(doc.clone()),
            None => {
                if let Some(def) = state.store().get_workflow(&w.name, Some(w.version)).await? {
                    out.push(rendered(&def));
                }
            }
        }
    }
    Ok(Json(out))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VersionParams {
    /// The version; the newest when absent.
    pub version: Option<u32>,
}

/// One workflow definition as a Conductor WorkflowDef: the document it was registered from
/// over this API, else rendered from the shiftboss definition.
#[utoipa::path(get, path = "/api/metadata/workflow/{name}", tag = "conductor",
    params(("name" = String, Path), VersionParams), security(("token" = ["read"])),
    responses((status = 200, body = Object), (status = 404, body = Problem)))]
pub async fn get_workflow(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<VersionParams>,
) -> Result<Json<Value>, ApiError> {
    let def = state.store().get_workflow(&name, q.version).await?;
    let def = def.ok_or_else(|| ApiError::not_found(format!("no workflow {name:?}")))?;
    let source = state.store().get_document(DocumentKind::WorkflowSource, &source_name(&def.name, def.version)).await?;
    Ok(Json(source.unwrap_or_else(|| rendered(&def))))
}

/// A definition registered otherwise (as YAML, or by the CLI) rendered as a Conductor WorkflowDef.
fn rendered(def: &WorkflowDef) -> Value {
    json!({
        "name": def.name,
        "version": def.version,
        "description": def.description,
        "schemaVersion": 2,
        "timeoutPolicy": "TIME_OUT_WF",
        "timeoutSeconds": def.timeout.map_or(0, |t| t.as_secs()),
        "outputParameters": def.output.clone().unwrap_or_else(|| json!({})),
        "inputParameters": [],
        "restartable": true,
        "tasks": def.steps.iter().map(step_as_conductor).collect::<Vec<_>>(),
    })
}

/// A step as a Conductor WorkflowTask: agent steps as SIMPLE (HTTP for the `http` agent),
/// control steps by their kind, with their inner steps left out.
fn step_as_conductor(s: &StepDef) -> Value {
    let (name, kind) = match (s.kind, s.agent.as_deref()) {
        (StepKind::Agent, Some("http")) => ("http".to_owned(), "HTTP".to_owned()),
        (StepKind::Agent, agent) => (agent.unwrap_or(&s.name).to_owned(), "SIMPLE".to_owned()),
        (k, _) => (s.name.clone(), k.as_str().to_ascii_uppercase()),
    };
    json!({
        "name": name,
        "taskReferenceName": s.name,
        "type": kind,
        "inputParameters": s.input.clone().unwrap_or_else(|| Value::Object(Map::new())),
    })
}

/// Registers task definitions (a list), for the workflow definitions registered after them.
#[utoipa::path(post, path = "/api/metadata/taskdefs", tag = "conductor",
    request_body(content = Vec<Object>, description = "Conductor TaskDefs", content_type = "application/json"),
    security(("token" = ["admin"])),
    responses((status = 200, description = "Kept"), (status = 422, body = Problem)))]
pub async fn register_task_defs(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let v: Value = json::parse(&json::body_bytes(req, &state).await?)?;
    let Value::Array(defs) = v else { return Err(ApiError::invalid("send a JSON array of TaskDefs")) };
    let mut named = Vec::with_capacity(defs.len());
    for (i, d) in defs.into_iter().enumerate() {
        named.push(task_def_name(d).map_err(|e| ApiError { detail: format!("[{i}]: {}", e.detail), ..e })?);
    }
    keep(&state, named).await
}

/// Registers or replaces one task definition.
#[utoipa::path(put, path = "/api/metadata/taskdefs", tag = "conductor",
    request_body(content = Object, description = "A Conductor TaskDef", content_type = "application/json"),
    security(("token" = ["admin"])),
    responses((status = 200, description = "Kept"), (status = 422, body = Problem)))]
pub async fn update_task_def(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let v: Value = json::parse(&json::body_bytes(req, &state).await?)?;
    keep(&state, vec![task_def_name(v)?]).await
}

fn task_def_name(d: Value) -> Result<(String, Value), ApiError> {
    let name = d.get("name").and_then(Value::as_str).map(str::to_owned);
    let name = name.ok_or_else(|| ApiError::invalid("a TaskDef needs a name"))?;
    shiftboss_core::workflow::check_name("name", &name).map_err(|e| ApiError::invalid(e.to_string()))?;
    // The importer reads it as it will when a workflow uses it: refuse now what it would refuse then.
    let probe = json!({"name": "probe", "tasks": [{"name": name, "taskReferenceName": "probe", "type": "SIMPLE"}]});
    shiftboss_conductor::from_conductor_with_tasks(&probe.to_string(), &[d.to_string().as_str()])
        .map_err(|e| ApiError::invalid(format!("not a TaskDef shiftboss can use: {e}")))?;
    Ok((name, d))
}

async fn keep(state: &AppState, defs: Vec<(String, Value)>) -> Result<Response, ApiError> {
    let kept = state.store().list_documents(DocumentKind::TaskDef).await?;
    let new = defs.iter().filter(|(n, _)| !kept.iter().any(|(k, _)| k == n)).count();
    if kept.len() + new > MAX_DOCUMENTS_LISTED as usize {
        return Err(ApiError::invalid(format!("at most {MAX_DOCUMENTS_LISTED} task definitions")));
    }
    state.store().put_documents(DocumentKind::TaskDef, defs).await?;
    Ok(StatusCode::OK.into_response())
}

/// Every task definition.
#[utoipa::path(get, path = "/api/metadata/taskdefs", tag = "conductor", security(("token" = ["read"])),
    responses((status = 200, body = Vec<Object>)))]
pub async fn list_task_defs(State(state): State<AppState>) -> Result<Json<Vec<Value>>, ApiError> {
    let kept = state.store().list_documents(DocumentKind::TaskDef).await?;
    Ok(Json(kept.into_iter().map(|(_, d)| d).collect()))
}

/// One task definition.
#[utoipa::path(get, path = "/api/metadata/taskdefs/{tasktype}", tag = "conductor",
    params(("tasktype" = String, Path)), security(("token" = ["read"])),
    responses((status = 200, body = Object), (status = 404, body = Problem)))]
pub async fn get_task_def(
    State(state): State<AppState>,
    Path(tasktype): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let d = match shiftboss_store::documents::validate_document_name(&tasktype) {
        Ok(()) => state.store().get_document(DocumentKind::TaskDef, &tasktype).await?,
        Err(_) => None,
    };
    d.map(Json).ok_or_else(|| ApiError::not_found(format!("no task definition {tasktype:?}")))
}

/// Forgets a task definition (workflow definitions registered with it keep what they took).
#[utoipa::path(delete, path = "/api/metadata/taskdefs/{tasktype}", tag = "conductor",
    params(("tasktype" = String, Path)), security(("token" = ["admin"])),
    responses((status = 200, description = "Forgotten"), (status = 404, body = Problem)))]
pub async fn delete_task_def(
    State(state): State<AppState>,
    Path(tasktype): Path<String>,
) -> Result<Response, ApiError> {
    let gone = shiftboss_store::documents::validate_document_name(&tasktype).is_ok()
        && state.store().delete_document(DocumentKind::TaskDef, &tasktype).await?;
    match gone {
        true => Ok(StatusCode::OK.into_response()),
        false => Err(ApiError::not_found(format!("no task definition {tasktype:?}"))),
    }
}
