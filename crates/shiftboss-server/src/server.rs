//! The router (every route, the middleware around them, the OpenAPI document made with them) and
//! the server's run with its graceful end.

use crate::auth::{self, AuthMode, Authenticator, RouteScopes};
use crate::error::ApiError;
use crate::limits::Limits;
use crate::metrics::ApiMetrics;
use crate::observe;
use crate::openapi::{self, ApiDoc, Spec};
use crate::routes;
use crate::state::AppState;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::{Extension, Router, middleware};
use shiftboss_engine::Engine;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes as api_routes;

/// Everything the API needs besides the engine.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub auth: AuthMode,
    pub limits: Limits,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig { auth: AuthMode::Tokens, limits: Limits::default() }
    }
}

/// The API's router and its OpenAPI document.
/// Why the API could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("route scopes: {0}")]
    Scopes(String),
}

pub fn app(engine: Engine, config: ApiConfig) -> Result<(Router, utoipa::openapi::OpenApi), ServerError> {
    let state = AppState {
        engine,
        auth: Arc::new(Authenticator::new(config.auth)),
        metrics: Arc::new(ApiMetrics::new()?),
        remote: Arc::new(routes::agents::RemoteWorkers::new(config.limits.request_time)),
        streams: Arc::new(tokio::sync::Semaphore::new(config.limits.streams)),
        limits: config.limits.clone(),
        charts: Arc::default(),
    };
    let (router, doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(routes::tasks::router())
        .merge(routes::stream::router())
        .merge(routes::actions::router())
        .merge(routes::bulk::router())
        .merge(routes::workflows::router())
        .merge(routes::jobs::router())
        .merge(routes::webhooks::router())
        .merge(routes::agents::router())
        .merge(routes::conductor::router())
        .merge(routes::health::router())
        .routes(api_routes!(openapi::openapi_json))
        .split_for_parts();
    let mut doc = doc;
    // After the merge: the document's operations exist only now.
    utoipa::Modify::modify(&openapi::ProblemAnswers, &mut doc);
    let spec = Spec(Arc::new(serde_json::to_string(&doc).unwrap_or_default()));
    let scopes = RouteScopes::from_doc(&serde_json::to_value(&doc).unwrap_or_default()).map_err(ServerError::Scopes)?;
    let limits = &config.limits;
    // The console's pages check their own session (they are not operations of the document).
    let router = router
        .merge(crate::console::router())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state((state.clone(), Arc::new(scopes)), auth::authenticate))
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(GlobalConcurrencyLimitLayer::new(limits.in_flight))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_time))
        .layer(Extension(spec))
        .layer(middleware::from_fn_with_state(state.clone(), observe::observe))
        .with_state(state);
    Ok((router, doc))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route (see /openapi.json)")
}

/// Serves until `shutdown` resolves, then stops accepting and finishes the requests in flight.
/// The caller bounds how long that may take.
///
/// Event streams never finish by themselves: they are told to end (see [`Closing`]) when
/// `shutdown` resolves, so that they do not hold the graceful end for its whole bound.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let router = router.layer(Extension(Closing(rx)));
    let shutdown = async move {
        shutdown.await;
        let _ = tx.send(true);
    };
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

/// True once the server is stopping: long answers (event streams) end then.
#[derive(Clone)]
pub struct Closing(pub tokio::sync::watch::Receiver<bool>);

impl Closing {
    /// Resolves when the server stops (never, for a router served some other way).
    pub async fn wait(mut self) {
        if self.0.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
