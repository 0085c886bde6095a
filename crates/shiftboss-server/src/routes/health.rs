//! Health for orchestrators (open, no token: a probe carries none) and metrics (a `read` token).

use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
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
}

/// The process is alive (it answers).
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, body = Health)))]
async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health { status: "ok".into(), instance: state.engine.instance().to_string() })
}

/// The process can serve: its state store answers (within 2 s). 503 otherwise.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, body = Health), (status = 503, body = Problem)))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    match tokio::time::timeout(STORE_PROBE, state.store().now()).await {
        Ok(Ok(_)) => Ok(Json(Health { status: "ok".into(), instance: state.engine.instance().to_string() })),
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
    let counts = async { tokio::try_join!(store.task_counts(), store.queue_stats()) };
    let counts = match tokio::time::timeout(STORE_PROBE, counts).await {
        Ok(Ok(c)) => Some(c),
        _ => None,
    };
    let text = state.metrics.render(&state.engine.metrics(), counts.as_ref().map(|(t, q)| (t.as_slice(), q)));
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}
