//! Which workers polled for which agent type, and when last: from the store, so that every serve
//! process answers the same.

use super::wire::{AgentWorkers, WorkerSeenAt, WorkersAnswer};
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::state::AppState;
use crate::wire::time;
use axum::extract::State;

/// The workers seen polling, per agent type, each with when it was first and last seen (written
/// at most every 5 s per worker; forgotten after a day unseen).
#[utoipa::path(get, path = "/v1/agents/workers", tag = "agents",
    security(("token" = ["read"])),
    responses((status = 200, body = WorkersAnswer), (status = 503, body = Problem)))]
pub async fn list_workers(State(state): State<AppState>) -> Result<Json<WorkersAnswer>, ApiError> {
    let rows = state.store().list_agent_workers().await?;
    let now = state.store().now().await?;
    let mut agents: Vec<AgentWorkers> = Vec::new();
    for r in rows {
        let w = WorkerSeenAt {
            worker: r.worker,
            first_seen_at: time(r.first_seen_at),
            last_seen_at: time(r.last_seen_at),
            seconds_since: now.since(r.last_seen_at).as_secs_f64(),
        };
        match agents.last_mut() {
            Some(a) if a.agent == r.agent => a.workers.push(w),
            _ => agents.push(AgentWorkers { agent: r.agent, workers: vec![w] }),
        }
    }
    Ok(Json(WorkersAnswer { agents }))
}
