//! Every error the API answers with: `application/problem+json` (RFC 9457) with a stable machine
//! `code`, a `detail` for people that names the place, and the request's id.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use shiftboss_engine::EngineError;
use shiftboss_store::StoreError;
use utoipa::ToSchema;

/// How long a client should wait before trying again when the store is out of reach.
const RETRY_AFTER_SECS: &str = "2";

/// An error answer. The request id is filled in by [`crate::request_id`] on the way out.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: String,
}

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem: `about:blank` with the status's own meaning.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The status's reason phrase.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// A stable machine code, such as `not_found`, `conflict`, `invalid_input`, `unauthorized`.
    pub code: &'static str,
    /// What went wrong, for a person, naming the place in the request.
    pub detail: String,
    /// The same as `detail`, under the name Conductor's error answers use: Conductor's SDKs show
    /// `message` in the errors they raise (`/api` routes), and would show nothing without it.
    pub message: String,
    /// The request's id (also in the `x-request-id` header): quote it when asking about a request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError { status, code, detail: detail.into() }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", detail)
    }

    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", detail)
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", detail)
    }

    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", detail)
    }

    /// The answer's body, with the request id when there is one.
    pub fn problem(&self, request_id: Option<String>) -> Problem {
        Problem {
            kind: "about:blank",
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            code: self.code,
            detail: self.detail.clone(),
            message: self.detail.clone(),
            request_id,
        }
    }
}

/// Renders a problem answer; the request id layer adds the id to the body afterwards, since the
/// handler that fails does not know it.
pub fn problem_response(status: StatusCode, problem: &Problem) -> Response {
    let body = serde_json::to_vec(problem).unwrap_or_default();
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECS));
    }
    r
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = problem_response(self.status, &self.problem(None));
        // The request-id layer finds the error here and writes the body again with the id in it.
        r.extensions_mut().insert(self);
        r
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound { .. } => ApiError::not_found(e.to_string()),
            StoreError::Conflict(_) => ApiError::conflict(e.to_string()),
            StoreError::InvalidInput(_) => ApiError::invalid(e.to_string()),
            StoreError::Unavailable(_) => ApiError::unavailable(e.to_string()),
            StoreError::NotLeader(_) | StoreError::Incompatible(_) | StoreError::Backend(_) => {
                // The store's own words may name tables and constraints: logged, not sent.
                tracing::error!(error = %e, "state store error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the state store failed; see the server's log",
                )
            }
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Store(s) => s.into(),
            EngineError::Agent { .. } | EngineError::Definition(_) | EngineError::Config(_) => {
                ApiError::invalid(e.to_string())
            }
            EngineError::NoTask(_) => ApiError::not_found(e.to_string()),
            EngineError::TimedOut(_) => ApiError::new(StatusCode::REQUEST_TIMEOUT, "timeout", e.to_string()),
        }
    }
}
