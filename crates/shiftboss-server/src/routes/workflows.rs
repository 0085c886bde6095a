//! Workflows: register (ours in JSON or YAML, or Conductor's WorkflowDef), check only, list, read.

use crate::error::{ApiError, Problem};
use crate::json::{self, Json};
use crate::query::{Path, Query};
use crate::state::AppState;
use crate::wire::{Registered, Workflow};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shiftboss_conductor as conductor;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::RegisterOutcome;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_workflow, list_workflows))
        .routes(routes!(validate_workflow))
        .routes(routes!(get_workflow))
        .routes(routes!(get_workflow_version))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct RegisterParams {
    /// Check only: answer what would be registered, and register nothing.
    #[serde(default)]
    dry_run: bool,
}

/// Registers a definition: shiftboss's own in JSON (`application/json`) or YAML
/// (`application/yaml`), or Conductor's WorkflowDef JSON (or a bundle
/// `{"workflowDef": ..., "taskDefs": [...]}`). Registering the same name, version and content again
/// changes nothing; the same name and version with other content is a 409.
#[utoipa::path(post, path = "/v1/workflows", tag = "workflows", params(RegisterParams),
    request_body(content = Object, description = "A definition", content_type = "application/json"),
    security(("token" = ["admin"])),
    responses(
        (status = 201, description = "Registered", body = Registered),
        (status = 200, description = "Already registered with the same content, or a dry run", body = Registered),
        (status = 409, body = Problem), (status = 422, description = "Not a valid definition", body = Problem)))]
async fn register_workflow(
    State(state): State<AppState>,
    Query(q): Query<RegisterParams>,
    req: Request,
) -> Result<Response, ApiError> {
    register(&state, req, q.dry_run).await
}

/// Checks a definition as registering does, and registers nothing.
#[utoipa::path(post, path = "/v1/workflows/validate", tag = "workflows",
    request_body(content = Object, description = "A definition", content_type = "application/json"),
    security(("token" = ["admin"])),
    responses((status = 200, body = Registered), (status = 422, body = Problem)))]
async fn validate_workflow(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    register(&state, req, true).await
}

async fn register(state: &AppState, req: Request, dry_run: bool) -> Result<Response, ApiError> {
    let ct = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    let yaml = ct.contains("yaml");
    if !yaml && !ct.contains("json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the definition as application/json or application/yaml",
        ));
    }
    let bytes = json::body_bytes(req, state).await?;
    let text = std::str::from_utf8(&bytes).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
    if text.trim().is_empty() {
        return Err(ApiError::invalid("the body is empty: send a definition"));
    }
    let (def, inline, notes) = read(text, yaml)?;
    // Everything is checked before anything is registered; sub-workflows a Conductor definition
    // gives inline are registered first, as it names them.
    for sub in &inline {
        state.engine.check_workflow(sub)?;
    }
    state.engine.check_workflow(&def)?;
    if !dry_run {
        for sub in &inline {
            state.engine.register_workflow(sub).await?;
        }
    }
    let (status, outcome) = if dry_run {
        (StatusCode::OK, "valid")
    } else {
        match state.engine.register_workflow(&def).await? {
            RegisterOutcome::Created => (StatusCode::CREATED, "created"),
            RegisterOutcome::Unchanged => (StatusCode::OK, "unchanged"),
        }
    };
    let body = Registered::new(&def, outcome, notes);
    Ok((status, Json(body)).into_response())
}

/// Reads a definition in whichever format it is, with the definitions it gives inline and the
/// importer's notes.
fn read(text: &str, yaml: bool) -> Result<(WorkflowDef, Vec<WorkflowDef>, Vec<String>), ApiError> {
    if !yaml && conductor::looks_like_conductor(text) {
        let import = conductor::from_conductor(text)
            .map_err(|e| ApiError::invalid(format!("not a Conductor definition shiftboss can run: {e}")))?;
        let mut notes = import.notes;
        for l in &import.limits {
            notes.push(format!(
                "agent {:?} had limits in Conductor (max_concurrent {:?}, per_second {:?}): set them per agent in the serve config",
                l.agent, l.max_concurrent, l.per_second
            ));
        }
        for sub in &import.sub_workflows {
            notes.push(format!("workflow {} v{} was given inline: registered first", sub.name, sub.version));
        }
        return Ok((import.workflow, import.sub_workflows, notes));
    }
    let def = if yaml { WorkflowDef::from_yaml(text) } else { WorkflowDef::from_json(text) };
    def.map(|d| (d, Vec::new(), Vec::new())).map_err(|e| ApiError::invalid(format!("invalid definition: {e}")))
}

/// Every registered definition, by name then version.
#[utoipa::path(get, path = "/v1/workflows", tag = "workflows", security(("token" = ["read"])),
    responses((status = 200, body = Vec<Workflow>)))]
async fn list_workflows(State(state): State<AppState>) -> Result<Json<Vec<Workflow>>, ApiError> {
    let all = state.store().list_workflows().await?;
    Ok(Json(all.into_iter().map(Workflow::from).collect()))
}

/// The newest version of a definition, as shiftboss keeps it.
#[utoipa::path(get, path = "/v1/workflows/{name}", tag = "workflows", params(("name" = String, Path)),
    security(("token" = ["read"])),
    responses((status = 200, body = Object), (status = 404, body = Problem)))]
async fn get_workflow(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<WorkflowDef>, ApiError> {
    let def = state.store().get_workflow(&name, None).await?;
    def.map(Json).ok_or_else(|| ApiError::not_found(format!("no workflow {name:?}")))
}

/// One version of a definition.
#[utoipa::path(get, path = "/v1/workflows/{name}/versions/{version}", tag = "workflows",
    params(("name" = String, Path), ("version" = u32, Path)),
    security(("token" = ["read"])),
    responses((status = 200, body = Object), (status = 404, body = Problem)))]
async fn get_workflow_version(
    State(state): State<AppState>,
    Path((name, version)): Path<(String, u32)>,
) -> Result<Json<WorkflowDef>, ApiError> {
    let def = state.store().get_workflow(&name, Some(version)).await?;
    def.map(Json).ok_or_else(|| ApiError::not_found(format!("no workflow {name:?} version {version}")))
}
