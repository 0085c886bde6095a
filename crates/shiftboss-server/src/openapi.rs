//! The OpenAPI 3.1 document, made from the handlers' own annotations (utoipa): a route that is
//! not in it cannot be mounted, since the router is made from the same list.

use axum::Extension;
use axum::http::header;
use axum::response::IntoResponse;
use std::sync::Arc;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "shiftboss",
        description = "The HTTP API of shiftboss, a durable workflow engine. Every route but /healthz, /readyz and \
/openapi.json needs `Authorization: Bearer <token>` with the scope each route names (admin allows all). \
Errors are application/problem+json (RFC 9457) with a stable `code`. Limits: request body 1 MiB by default \
(413 beyond), JSON nesting 128 levels, task keys 200 bytes, reasons 1,000 bytes, pages 1 to 1,000 items, \
30 s per request (408 beyond). Ids are opaque strings."
    ),
    modifiers(&BearerToken),
    tags(
        (name = "tasks", description = "Submit tasks and read them"),
        (name = "operator", description = "Operator actions on tasks and steps"),
        (name = "workflows", description = "Workflow definitions"),
        (name = "jobs", description = "Retry jobs"),
        (name = "health", description = "Health and metrics"),
    )
)]
pub struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme("token", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The document as served, written once at start.
#[derive(Clone)]
pub struct Spec(pub Arc<String>);

/// This API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "health",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object)))]
pub async fn openapi_json(Extension(spec): Extension<Spec>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], spec.0.as_str().to_owned())
}
