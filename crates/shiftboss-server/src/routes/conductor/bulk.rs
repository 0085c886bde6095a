//! Conductor's bulk workflow actions (`/api/workflow/bulk/...`): a list of workflow ids in the body,
//! each acted on as its single route does, in its own transaction; the answer says which succeeded
//! and why each other did not (Conductor's BulkResponse).

use super::workflows::{act, first_or};
use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::Query;
use crate::state::AppState;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shiftboss_store::TaskCommand;
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

/// The most workflows one bulk request takes (as Conductor's).
const MAX_BULK: usize = 1000;

/// Which workflows were acted on, and why the others were not.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkResponse {
    pub bulk_successful_results: Vec<String>,
    pub bulk_error_results: BTreeMap<String, String>,
    pub message: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct BulkParams {
    /// Why (terminate), for the workflows' events.
    pub reason: Option<String>,
    /// Conductor's; shiftboss starts a failure workflow when a workflow fails, not when it is terminated.
    #[allow(dead_code)]
    pub trigger_failure_workflow: Option<bool>,
    /// Conductor's restart option; the definition a workflow started with is the one it reruns.
    #[allow(dead_code)]
    pub use_latest_definitions: Option<bool>,
}

#[derive(Clone, Copy)]
enum Verb {
    Pause,
    Resume,
    Retry,
    Restart,
    Terminate,
}

async fn each(
    state: &AppState,
    principal: &Principal,
    ids: Vec<String>,
    verb: Verb,
    reason: String,
) -> Result<Json<BulkResponse>, ApiError> {
    if ids.len() > MAX_BULK {
        return Err(ApiError::invalid(format!("at most {MAX_BULK} workflow ids at once; {} given", ids.len())));
    }
    let mut ok = Vec::new();
    let mut failed = BTreeMap::new();
    for id in ids {
        let command = match verb {
            Verb::Pause => Ok(TaskCommand::Pause),
            Verb::Resume => Ok(TaskCommand::Resume),
            Verb::Retry => Ok(TaskCommand::Retry),
            Verb::Terminate => Ok(TaskCommand::Terminate),
            Verb::Restart => first_or(state, &id, None).await.map(|from| TaskCommand::Rerun { from }),
        };
        let done = match command {
            Ok(c) => act(state, principal, &id, reason.clone(), c).await,
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => ok.push(id),
            Err(e) => {
                failed.insert(id, e.detail);
            }
        }
    }
    Ok(Json(BulkResponse {
        bulk_successful_results: ok,
        bulk_error_results: failed,
        message: "Bulk Request has been processed.".into(),
    }))
}

macro_rules! bulk_action {
    ($name:ident, $method:ident, $path:literal, $verb:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path($method, path = $path, tag = "conductor", params(BulkParams),
                                    request_body(content = Vec<String>, description = "Workflow ids (at most 1,000)"),
                                    security(("token" = ["operate"])),
                                    responses((status = 200, body = BulkResponse), (status = 422, body = Problem)))]
        pub async fn $name(
            State(state): State<AppState>,
            principal: Principal,
            Query(q): Query<BulkParams>,
            Json(ids): Json<Vec<String>>,
        ) -> Result<Json<BulkResponse>, ApiError> {
            each(&state, &principal, ids, $verb, q.reason.unwrap_or_default()).await
        }
    };
}

bulk_action!(pause, put, "/api/workflow/bulk/pause", Verb::Pause, "Pauses each workflow listed.");
bulk_action!(resume, put, "/api/workflow/bulk/resume", Verb::Resume, "Resumes each paused workflow listed.");
bulk_action!(retry, post, "/api/workflow/bulk/retry", Verb::Retry, "Retries each failed workflow listed.");
bulk_action!(
    restart,
    post,
    "/api/workflow/bulk/restart",
    Verb::Restart,
    "Restarts each ended workflow listed from its first task."
);
bulk_action!(
    terminate,
    post,
    "/api/workflow/bulk/terminate",
    Verb::Terminate,
    "Terminates each workflow listed (`reason`)."
);
