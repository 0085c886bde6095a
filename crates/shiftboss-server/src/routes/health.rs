//! Health for orchestrators (open, no token: a probe carries none) and metrics (a `read` token).

use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use shiftboss_store::Replication;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// How long readiness and a scrape wait on the store before calling it out of reach.
const STORE_PROBE: Duration = Duration::from_secs(2);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz)).routes(routes!(metrics))
}

/// What a health probe answers.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// ok
    pub status: String,
    /// This process's instance id.
    pub instance: String,
    /// `/readyz` on a store that replicates (PostgreSQL): whether a commit waits for a standby.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<ReplicationView>,
}

/// The store's replication, as `/readyz` reports it (issue 26).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReplicationView {
    /// The server's `synchronous_commit`.
    pub synchronous_commit: String,
    /// The server's `synchronous_standby_names`; empty: none.
    pub synchronous_standby_names: String,
    /// Standbys streaming from the server.
    pub standbys: u32,
    /// Of those, the ones a commit waits for (0 when the store's role cannot see their state).
    pub synchronous_standbys: u32,
    /// True when a commit is acknowledged only once a standby has it.
    pub commits_wait_for_a_standby: bool,
    /// Set when standbys exist but replicate asynchronously: a failover may lose acknowledged work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl From<Replication> for ReplicationView {
    fn from(r: Replication) -> Self {
        ReplicationView {
            commits_wait_for_a_standby: r.commits_wait_for_a_standby(),
            warning: r.warning(),
            synchronous_commit: r.synchronous_commit,
            synchronous_standby_names: r.synchronous_standby_names,
            standbys: r.standbys,
            synchronous_standbys: r.synchronous_standbys,
        }
    }
}

/// The process is alive (it answers).
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, body = Health)))]
async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health { status: "ok".into(), instance: state.engine.instance().to_string(), replication: None })
}

/// The process can serve: its state store answers (within 2 s). 503 otherwise. On a store that
/// replicates, says whether a commit waits for a standby, with a warning when standbys replicate
/// asynchronously (still ready: the store works, but a failover may lose acknowledged work).
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, body = Health), (status = 503, body = Problem)))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let store = state.store();
    let probe = async { tokio::try_join!(store.now(), store.replication()) };
    match tokio::time::timeout(STORE_PROBE, probe).await {
        Ok(Ok((_, replication))) => Ok(Json(Health {
            status: "ok".into(),
            instance: state.engine.instance().to_string(),
            replication: replication.map(ReplicationView::from),
        })),
        Ok(Err(e)) => Err(ApiError::unavailable(format!("the state store does not answer: {e}"))),
        Err(_) => Err(ApiError::unavailable(format!("the state store did not answer within {STORE_PROBE:?}"))),
    }
}

/// Prometheus metrics (text format 0.0.4). Needs a token with the `read` scope.
#[utoipa::path(get, path = "/metrics", tag = "health", security(("token" = ["read"])),
    responses((status = 200, content_type = "text/plain", body = String)))]
async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    // A scrape while the store is out of reach still answers, with store_up 0.
    let store = state.store();
    let counts = async {
        tokio::try_join!(store.task_counts(), store.queue_stats(), store.delivery_backlog(crate::metrics::BACKLOG_CAP))
    };
    let counts = match tokio::time::timeout(STORE_PROBE, counts).await {
        Ok(Ok(c)) => Some(c),
        _ => None,
    };
    let store = counts.as_ref().map(|(tasks, queues, backlog)| crate::metrics::StoreCounts { tasks, queues, backlog });
    let text = state.metrics.render(&state.engine.metrics(), store);
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}
