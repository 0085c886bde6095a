//! Conductor's queue routes: how many tasks of a type wait (queue sizes), and which workers polled
//! for a type, when last (poll data). Both read what the native API reads: the store's per-agent
//! queue counts and its table of workers seen, so every serve process answers the same.

use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::Query;
use crate::state::AppState;
use axum::extract::State;
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// One worker's last poll for a task type, in Conductor's shape.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PollData {
    /// The task type.
    pub queue_name: String,
    /// Always absent: a worker's domains are not kept with its polls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub worker_id: String,
    /// Epoch milliseconds, to within the API's write interval (5 s).
    pub last_poll_time: i64,
}

/// The `taskType` parameters, in order; any other parameter is refused.
fn task_types(params: Vec<(String, String)>) -> Result<Vec<String>, ApiError> {
    params
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "taskType" => Ok(v),
            other => Err(ApiError::bad_request(format!("unknown query parameter {other:?} (taskType only)"))),
        })
        .collect()
}

/// How many tasks of each named type wait to be polled (due now or later), by type; a type with
/// none is 0. With no `taskType`, every type that has a live step.
#[utoipa::path(get, path = "/api/tasks/queue/sizes", tag = "conductor",
    params(("taskType" = Option<Vec<String>>, Query, description = "A task type; repeat for several")),
    security(("token" = ["read"])),
    responses((status = 200, body = BTreeMap<String, u64>), (status = 400, body = Problem), (status = 503, body = Problem)))]
pub async fn sizes(
    State(state): State<AppState>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<BTreeMap<String, u64>>, ApiError> {
    let wanted = task_types(params)?;
    let stats = state.store().queue_stats().await?;
    let mut sizes: BTreeMap<String, u64> = wanted.iter().map(|t| (t.clone(), 0)).collect();
    for q in stats.agents {
        if wanted.is_empty() || sizes.contains_key(&q.agent) {
            sizes.insert(q.agent, q.due + q.later);
        }
    }
    Ok(Json(sizes))
}

/// The workers that polled for a task type, each with its last poll (forgotten after a day
/// unseen).
#[utoipa::path(get, path = "/api/tasks/queue/polldata", tag = "conductor",
    params(("taskType" = String, Query, description = "The task type")),
    security(("token" = ["read"])),
    responses((status = 200, body = Vec<PollData>), (status = 400, body = Problem), (status = 503, body = Problem)))]
pub async fn poll_data(
    State(state): State<AppState>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Vec<PollData>>, ApiError> {
    let [task_type] = <[String; 1]>::try_from(task_types(params)?)
        .map_err(|_| ApiError::bad_request("taskType: give exactly one"))?;
    let rows = state.store().list_agent_workers().await?;
    Ok(Json(
        rows.into_iter()
            .filter(|r| r.agent == task_type)
            .map(|r| PollData {
                queue_name: r.agent,
                domain: None,
                worker_id: r.worker,
                last_poll_time: r.last_seen_at.0,
            })
            .collect(),
    ))
}
