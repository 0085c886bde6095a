//! The JSON body extractor: the body limit answers 413, malformed JSON 400, JSON of the wrong
//! shape 422 with the path of the field at fault, all as problems.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A JSON request body, or a JSON answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(&req) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON, with Content-Type: application/json",
            ));
        }
        let bytes = body_bytes(req, state).await?;
        parse(&bytes).map(Json)
    }
}

/// The body's bytes, within the router's body limit.
pub async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        let status = e.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                status,
                "body_too_large",
                "the body is larger than this server accepts (see the limits in the API's docs)",
            )
        } else {
            ApiError::bad_request(format!("the body could not be read: {e}"))
        }
    })
}

/// Parses JSON, telling a malformed document (400) from one of the wrong shape (422).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let place = if path == "." || path.is_empty() { String::new() } else { format!("{path}: ") };
        if inner.is_data() {
            ApiError::invalid(format!("{place}{inner}"))
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", format!("malformed JSON: {inner}"))
        }
    })?;
    Ok(value)
}

fn is_json(req: &Request) -> bool {
    let Some(ct) = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(e) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("the answer could not be written: {e}"),
            )
            .into_response(),
        }
    }
}
