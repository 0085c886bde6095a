//! One middleware around every request: its id (taken from `x-request-id` when the client sent a
//! usable one), a tracing span that carries the id to every log line of the request, the metrics,
//! and a problem body (with the id) for every error answer, those of axum's own layers included.

use crate::error::{ApiError, Problem, problem_response};
use crate::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tracing::Instrument;

pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

static NEXT: AtomicU64 = AtomicU64::new(1);

fn new_id() -> String {
    // Unique within the process; the process start time keeps ids apart across restarts.
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = START.get_or_init(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
    });
    format!("{start:x}-{:x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn client_id(req: &Request) -> Option<String> {
    let v = req.headers().get(&REQUEST_ID)?.to_str().ok()?;
    (!v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic())).then(|| v.to_owned())
}

pub async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = client_id(&req).unwrap_or_else(new_id);
    let route = req.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_owned();
    let method = req.method().as_str().to_owned();
    let span = tracing::info_span!("request", request_id = %id, method = %method, route = %route);
    let mut res = next.run(req).instrument(span.clone()).await;
    let status = res.status();
    if status.is_client_error() || status.is_server_error() {
        res = with_problem(res, &id);
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(REQUEST_ID.clone(), v);
    }
    let took = started.elapsed();
    state.metrics.request(&route, &method, status.as_u16(), took);
    span.in_scope(|| {
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), took_ms = took.as_millis() as u64, "request failed");
        } else {
            tracing::info!(status = status.as_u16(), took_ms = took.as_millis() as u64, "request served");
        }
    });
    res
}

/// The answer with a problem body that names the request: an [`ApiError`]'s, or one made from
/// the status of an answer that has none (a timeout, a method not allowed).
fn with_problem(res: Response, id: &str) -> Response {
    let status = res.status();
    let problem: Problem = match res.extensions().get::<ApiError>() {
        Some(e) => e.problem(Some(id.to_owned())),
        None => {
            // A problem already, or a console page that explains itself to a person.
            let keep = res.headers().get(header::CONTENT_TYPE).is_some_and(|v| {
                v.as_bytes().starts_with(b"application/problem+json") || v.as_bytes().starts_with(b"text/html")
            });
            if keep {
                return res;
            }
            let (code, detail) = plain(status);
            ApiError::new(status, code, detail).problem(Some(id.to_owned()))
        }
    };
    let mut out = problem_response(status, &problem);
    for (name, value) in res.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

fn plain(status: StatusCode) -> (&'static str, String) {
    match status {
        StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", "this route does not take that method".into()),
        StatusCode::REQUEST_TIMEOUT => ("request_timeout", "the request took longer than this server allows".into()),
        StatusCode::PAYLOAD_TOO_LARGE => ("body_too_large", "the body is larger than this server accepts".into()),
        StatusCode::NOT_FOUND => ("not_found", "no such route".into()),
        s => ("error", s.canonical_reason().unwrap_or("error").to_owned()),
    }
}
