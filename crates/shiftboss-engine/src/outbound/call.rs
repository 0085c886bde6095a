//! One outbound call: secrets resolved into the request, the guard on every hop, redirects
//! followed only when the caller allows them, the body read up to its limit, and the whole call
//! bounded in time.

use super::secrets::{Resolved, SecretError};
use super::{Outbound, Refusal, tls};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, HeaderName, HeaderValue, LOCATION, PROXY_AUTHORIZATION};
use reqwest::{Method, StatusCode, Url};
use std::time::Duration;
use tokio::time::Instant;

/// What a request sends.
#[derive(Debug, Clone)]
pub enum Body {
    None,
    /// Serialised as JSON, `Content-Type: application/json`.
    Json(serde_json::Value),
    /// Sent as it is with this content type.
    Text {
        content_type: String,
        text: String,
    },
}

#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    /// May not hold secret references: URLs appear in errors.
    pub url: Url,
    /// Values may hold `${secret.NAME}`: headers the definition wrote.
    pub headers: Vec<(String, String)>,
    /// Sent as they are, never resolved: headers whose values come from elsewhere (an
    /// idempotency key, ids), which must not be a way to read a secret out.
    pub plain_headers: Vec<(String, String)>,
    pub body: Body,
    /// Whether the body's strings may hold secret references: true for a body the definition
    /// wrote, never for a task's input (whoever submits a task must not read secrets out).
    pub body_secrets: bool,
    pub follow_redirects: bool,
    /// The caller's bound on the whole call, besides the client's `call_timeout`.
    pub timeout: Option<Duration>,
    /// When the caller stops waiting (the step's complete-by); the call stops no later.
    pub deadline: Option<Instant>,
}

impl Request {
    pub fn new(method: Method, url: Url) -> Request {
        Request {
            method,
            url,
            headers: Vec::new(),
            plain_headers: Vec::new(),
            body: Body::None,
            body_secrets: false,
            follow_redirects: false,
            timeout: None,
            deadline: None,
        }
    }
}

/// A whole answer, any status but a redirect. Every secret the request used is scrubbed from it.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: StatusCode,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Where the answer came from, after redirects.
    pub url: Url,
}

/// Why a call failed. No variant holds a secret's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("{0}")]
    Tls(String),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("the response body is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("HTTP {status}: redirect to {location:?} not followed (the call does not allow redirects)")]
    RedirectNotFollowed { status: u16, location: String },
    #[error("more than {limit} redirects")]
    TooManyRedirects { limit: u32 },
    #[error("redirect refused: {0}")]
    BadRedirect(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("request failed: {0}")]
    Other(String),
}

impl CallError {
    /// Whether trying again may help: network faults may pass; a refusal, a certificate, a
    /// missing secret or an oversized answer will not.
    pub fn is_transient(&self) -> bool {
        matches!(self, CallError::Timeout(_) | CallError::Connect(_) | CallError::Other(_))
    }
}

/// A header to send, and whether its value came from a secret.
struct Header {
    name: HeaderName,
    value: HeaderValue,
    secret: bool,
}

impl Outbound {
    /// Makes one call. The whole of it (every hop and the body) ends within the request's
    /// timeout, the client's `call_timeout` and the deadline, whichever comes first.
    pub async fn call(&self, req: Request) -> Result<Response, CallError> {
        let bound = req.timeout.map_or(self.limits.call_timeout, |t| t.min(self.limits.call_timeout));
        let mut end = Instant::now() + bound;
        if let Some(d) = req.deadline {
            end = end.min(d);
        }
        let mut used = Resolved::default();
        match tokio::time::timeout_at(end, self.call_within(req, &mut used)).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout(format!("no whole answer within {bound:?} or the step's deadline"))),
        }
    }

    async fn call_within(&self, req: Request, used: &mut Resolved) -> Result<Response, CallError> {
        let mut headers = Vec::with_capacity(req.headers.len() + req.plain_headers.len());
        for (k, v) in &req.plain_headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| CallError::Invalid(format!("invalid header name {k:?}")))?;
            let value =
                HeaderValue::from_str(v).map_err(|_| CallError::Invalid(format!("invalid value for header {k:?}")))?;
            headers.push(Header { name, value, secret: false });
        }
        for (k, v) in &req.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| CallError::Invalid(format!("invalid header name {k:?}")))?;
            let secret = !super::secrets::references(v)?.is_empty();
            let resolved = self.secrets.resolve(v, used)?;
            let mut value = HeaderValue::from_str(&resolved)
                .map_err(|_| CallError::Invalid(format!("invalid value for header {k:?}")))?;
            value.set_sensitive(secret);
            headers.push(Header { name, value, secret });
        }
        let mut body = match (req.body, req.body_secrets) {
            (Body::Json(v), true) => Body::Json(self.secrets.resolve_json(&v, used)?),
            (Body::Text { content_type, text }, true) => {
                Body::Text { content_type, text: self.secrets.resolve(&text, used)? }
            }
            (b, _) => b,
        };
        let mut method = req.method;
        let mut url = req.url;
        let mut hops = 0;
        loop {
            if !matches!(url.scheme(), "http" | "https") {
                return Err(CallError::Invalid(format!("url scheme {:?}: only http and https", url.scheme())));
            }
            self.guard.check_url(&url)?;
            // No per-request timeout: `call` bounds the whole call (every hop and the body) with
            // one timer.
            let mut rb = self.client.request(method.clone(), url.clone());
            for h in &headers {
                rb = rb.header(h.name.clone(), h.value.clone());
            }
            rb = match &body {
                Body::None => rb,
                Body::Json(v) => rb.json(v),
                Body::Text { content_type, text } => rb.header(CONTENT_TYPE, content_type).body(text.clone()),
            };
            let mut resp = rb.send().await.map_err(|e| classify(&e, used))?;
            let status = resp.status();
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let location = resp.headers().get(LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                let location = used.scrub(&location);
                if !req.follow_redirects {
                    return Err(CallError::RedirectNotFollowed { status: status.as_u16(), location });
                }
                if location.is_empty() {
                    return Err(CallError::BadRedirect(format!("HTTP {status} without a Location")));
                }
                hops += 1;
                if hops > self.limits.max_redirects {
                    return Err(CallError::TooManyRedirects { limit: self.limits.max_redirects });
                }
                let next =
                    url.join(&location).map_err(|e| CallError::BadRedirect(format!("location {location:?}: {e}")))?;
                if url.scheme() == "https" && next.scheme() == "http" {
                    return Err(CallError::BadRedirect(format!("from https to plain http ({location:?})")));
                }
                if next.origin() != url.origin() {
                    // Credentials were meant for the origin the definition named, not wherever it
                    // sends us.
                    headers.retain(|h| {
                        !h.secret && h.name != AUTHORIZATION && h.name != COOKIE && h.name != PROXY_AUTHORIZATION
                    });
                }
                let keeps_method = matches!(status, StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT);
                if !keeps_method && method != Method::HEAD {
                    method = Method::GET;
                    body = Body::None;
                }
                url = next;
                continue;
            }
            let limit = self.limits.max_response_bytes;
            if resp.content_length().is_some_and(|n| n > limit) {
                return Err(CallError::TooLarge { limit });
            }
            let mut bytes = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(|e| classify(&e, used))? {
                if (bytes.len() + chunk.len()) as u64 > limit {
                    return Err(CallError::TooLarge { limit });
                }
                bytes.extend_from_slice(&chunk);
            }
            let mut out_headers = Vec::with_capacity(resp.headers().len());
            for (k, v) in resp.headers() {
                out_headers.push((k.as_str().to_owned(), used.scrub(&String::from_utf8_lossy(v.as_bytes()))));
            }
            if !used.is_empty() {
                let text = String::from_utf8_lossy(&bytes);
                if used.contains_any(&text) {
                    bytes = used.scrub(&text).into_bytes();
                }
            }
            return Ok(Response { status, headers: out_headers, body: bytes, url });
        }
    }
}

/// Sorts a client error: a guard refusal and a TLS failure are permanent and say so; the rest
/// are network faults.
fn classify(e: &reqwest::Error, used: &Resolved) -> CallError {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut text = String::new();
    while let Some(err) = next {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return CallError::Refused(r.clone());
        }
        let part = err.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        next = err.source();
    }
    if let Some(t) = tls::describe(e) {
        return CallError::Tls(t);
    }
    let text: String = used.scrub(&text).chars().take(500).collect();
    if e.is_timeout() {
        CallError::Timeout(text)
    } else if e.is_connect() {
        CallError::Connect(text)
    } else {
        CallError::Other(text)
    }
}
