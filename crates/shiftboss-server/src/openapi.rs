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
    components(schemas(crate::error::Problem)),
    tags(
        (name = "tasks", description = "Submit tasks and read them"),
        (name = "operator", description = "Operator actions on tasks and steps"),
        (name = "workflows", description = "Workflow definitions"),
        (name = "jobs", description = "Retry jobs"),
        (name = "subscriptions", description = "Status channels: webhooks signed as Standard Webhooks, from an outbox written with each change (docs/status-channels.md)"),
        (name = "agents", description = "The worker protocol: remote workers poll for steps and answer for them (docs/worker-protocol.md)"),
        (name = "conductor", description = "Conductor's worker, workflow and metadata APIs under /api, for Conductor's SDKs (docs/conductor-api.md); `X-Authorization: <token>` is taken as a bearer token"),
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

/// The errors any operation may answer, besides those it names: a problem body each.
const COMMON_ERRORS: [(&str, &str); 9] = [
    ("400", "Malformed JSON or a bad query parameter"),
    ("401", "No token, or an unknown or revoked one"),
    ("403", "The token lacks the operation's scope"),
    ("404", "Nothing by that id, key or name"),
    ("408", "The request took longer than the server allows"),
    ("413", "The body is larger than the server accepts"),
    ("415", "The body is not of a type the operation takes"),
    ("422", "Input of the wrong shape, or invalid"),
    ("503", "The state store is out of reach for now (see Retry-After)"),
];

/// Every error answer is `application/problem+json` with the `Problem` schema: the ones the
/// handlers name get that content type, and the common ones are added to every operation.
pub struct ProblemAnswers;

impl Modify for ProblemAnswers {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{Content, Ref, RefOr, ResponseBuilder};
        let problem = || Content::new(Some(Ref::from_schema_name("Problem")));
        for item in doc.paths.paths.values_mut() {
            let ops = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
                &mut item.head,
                &mut item.options,
                &mut item.trace,
            ];
            for op in ops.into_iter().flatten() {
                let responses = &mut op.responses.responses;
                for (code, answer) in responses.iter_mut() {
                    if let (true, RefOr::T(r)) = (code.starts_with('4') || code.starts_with('5'), answer) {
                        r.content.clear();
                        r.content.insert("application/problem+json".into(), problem());
                    }
                }
                for (code, why) in COMMON_ERRORS {
                    responses.entry(code.to_owned()).or_insert_with(|| {
                        RefOr::T(
                            ResponseBuilder::new()
                                .description(why)
                                .content("application/problem+json", problem())
                                .build(),
                        )
                    });
                }
            }
        }
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
