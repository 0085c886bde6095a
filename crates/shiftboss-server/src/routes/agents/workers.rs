//! Which workers polled for which agent type, and when last: from the store, so that every serve
//! process answers the same. And a restarted worker's release of the steps it held before.

use super::poll::worker_instance;
use super::wire::{ReleaseAnswer, WorkersAnswer};
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::state::AppState;
use axum::extract::{Path, State};
use shiftboss_store::ReleaseInstanceClaims;

/// The workers seen polling, per agent type, each with when it was first and last seen (written
/// at most every 5 s per worker; forgotten after a day unseen).
#[utoipa::path(get, path = "/v1/agents/workers", tag = "agents",
    security(("token" = ["read"])),
    responses((status = 200, body = WorkersAnswer), (status = 503, body = Problem)))]
pub async fn list_workers(State(state): State<AppState>) -> Result<Json<WorkersAnswer>, ApiError> {
    let rows = state.store().list_agent_workers().await?;
    let now = state.store().now().await?;
    Ok(Json(WorkersAnswer::from_rows(rows, now)))
}

/// Takes back the steps a worker holds, as a restarted scheduler takes back its own (P9): a worker
/// that starts again under the id it had before calls this first, and what it held when it
/// stopped is pending again at once, its attempt counted as failed, instead of waiting for its
/// complete-by. Each step is fenced by the lease it was read with, so a reply under a released
/// lease is refused (409 `lease_lost`). The ids of workers running at once must differ: this
/// releases whatever is held under the id, by whichever process.
#[utoipa::path(post, path = "/v1/agents/workers/{worker}/release", tag = "agents",
    params(("worker" = String, Path, description = "The worker's id (1 to 100 visible ASCII characters)")),
    security(("token" = ["agent"])),
    responses(
        (status = 200, description = "What was taken back (nothing, when the worker held nothing)", body = ReleaseAnswer),
        (status = 422, description = "A bad worker id", body = Problem),
        (status = 503, body = Problem)))]
pub async fn release_worker(
    State(state): State<AppState>,
    Path(worker): Path<String>,
) -> Result<Json<ReleaseAnswer>, ApiError> {
    let p = ReleaseInstanceClaims { instance: worker_instance(&worker)?, policies: state.engine.policies().clone() };
    let r = state.store().release_instance_claims(p).await?;
    if r.retried + r.gave_up > 0 {
        tracing::info!(%worker, returned = r.retried, gave_up = r.gave_up, "released the steps a restarted worker held");
    }
    Ok(Json(r.into()))
}
