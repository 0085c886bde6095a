//! Bulk operator actions over a filter: cancel, retry, or resubmit the steps in Error of every
//! task matched, oldest first, each task in a transaction of its own; a dry run counts and
//! changes nothing. A task whose state forbids the action is reported, not fatal.

use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::Path;
use crate::routes::tasks::FilterParams;
use crate::state::AppState;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shiftboss_store::{BulkCommand, BulkOperate, BulkReport};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The most tasks one bulk request acts on: at a few milliseconds per task, well within a
/// request's time. `more` in the answer says to send it again.
pub const MAX_BULK: u32 = 1000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(bulk))
}

/// A bulk action. (Serialize too: the CLI's API client sends this very type.)
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// Which tasks (every filter given must match); `{}` matches every task.
    #[serde(default)]
    pub filter: FilterParams,
    /// Why, for each task's event log.
    pub reason: String,
    /// Count only: change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// At most this many tasks, oldest first (1 to 1000, default 1000).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// One task the action could not act on (it changed nothing there).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkFailure {
    pub task_id: String,
    /// conflict (the task's state forbids the action), not_found, ...
    pub code: String,
    pub detail: String,
}

/// What a bulk action did, or with `dry_run` would do.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkDone {
    pub action: String,
    pub dry_run: bool,
    /// Tasks that matched, at most the limit.
    pub matched: u64,
    /// More tasks matched than the limit: send the request again for the rest.
    pub more: bool,
    /// Tasks acted on (0 on a dry run).
    pub acted: u64,
    /// Tasks that refused the action.
    pub failed: u64,
    /// The first of those, with why.
    pub failures: Vec<BulkFailure>,
}

/// Cancels, retries, or resubmits the steps in Error of, every task a filter matches.
#[utoipa::path(post, path = "/v1/tasks/bulk/{action}", tag = "operator",
    params(("action" = String, Path, description = "cancel, retry or resubmit")),
    request_body = BulkRequest, security(("token" = ["operate"])),
    responses((status = 200, body = BulkDone), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn bulk(
    State(state): State<AppState>,
    principal: Principal,
    Path(action): Path<String>,
    Json(r): Json<BulkRequest>,
) -> Result<Json<BulkDone>, ApiError> {
    let command = match action.as_str() {
        "cancel" => BulkCommand::Cancel,
        "retry" => BulkCommand::Retry,
        "resubmit" => BulkCommand::Resubmit,
        other => return Err(ApiError::not_found(format!("no bulk action {other:?}: use cancel, retry or resubmit"))),
    };
    let limit = match r.limit {
        None => MAX_BULK,
        Some(n) if (1..=MAX_BULK).contains(&n) => n,
        Some(_) => return Err(ApiError::invalid(format!("limit: 1 to {MAX_BULK}"))),
    };
    let filter = r.filter.filter(|m| ApiError::invalid(format!("filter.{m}")))?;
    let report = state
        .store()
        .bulk_operate(BulkOperate {
            filter,
            command,
            actor: principal.name.clone(),
            reason: r.reason,
            dry_run: r.dry_run,
            limit,
        })
        .await?;
    if report.acted > 0 {
        state.engine.wake();
    }
    Ok(Json(BulkDone::new(command, r.dry_run, report)))
}

impl BulkDone {
    /// The answer for a store's report (the CLI's direct path renders the same).
    pub fn new(command: BulkCommand, dry_run: bool, report: BulkReport) -> BulkDone {
        let failures = report
            .failures
            .into_iter()
            .map(|f| {
                let e = ApiError::from(f.error);
                BulkFailure { task_id: f.task_id.to_string(), code: e.code.to_owned(), detail: e.detail }
            })
            .collect();
        BulkDone {
            action: command.as_str().to_owned(),
            dry_run,
            matched: report.matched,
            more: report.more,
            acted: report.acted,
            failed: report.failed,
            failures,
        }
    }
}
