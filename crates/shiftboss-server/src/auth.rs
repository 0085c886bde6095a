//! Deny by default: every route but the health probes and the OpenAPI document needs a bearer
//! token, and each route a scope. The store keeps only a token's hash; a token found is kept in
//! memory for a few seconds, so a revocation takes effect within [`CACHE_FOR`] on every process.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
pub use shiftboss_core::token::Scope;
use shiftboss_core::token::{Scopes, hash_secret};
use shiftboss_store::Store;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a token found in the store is trusted without asking it again.
pub const CACHE_FOR: Duration = Duration::from_secs(5);
/// The most tokens kept in memory; beyond it the cache starts afresh.
const CACHE_MAX: usize = 10_000;
/// Paths that answer without a token: probes carry none, and the API's description is public.
const OPEN_PATHS: [&str; 3] = ["/healthz", "/readyz", "/openapi.json"];

/// Who is calling, and what they may do. Handlers take it as an argument and check the scope
/// they need with [`Principal::require`].
#[derive(Debug, Clone)]
pub struct Principal {
    /// The token's name: the actor of what the request does, in the event log.
    pub name: String,
    pub scopes: Scopes,
}

impl Principal {
    /// 403 unless the token allows `scope` (admin allows everything).
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.scopes.allows(scope) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "token {:?} has scopes [{}]; this needs {}",
                self.name, self.scopes, scope
            )))
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts.extensions.get::<Principal>().cloned().ok_or_else(|| ApiError::unauthorized("no token was presented"))
    }
}

/// Whether requests need tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Bearer tokens from the store (the default).
    Tokens,
    /// `--insecure-no-auth`: every request acts as `anonymous` with every scope. Loopback only.
    Disabled,
}

pub struct Authenticator {
    mode: AuthMode,
    cache: Mutex<HashMap<String, (Principal, Instant)>>,
}

impl Authenticator {
    pub fn new(mode: AuthMode) -> Self {
        Authenticator { mode, cache: Mutex::default() }
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// The principal a bearer secret stands for.
    async fn principal(&self, store: &dyn Store, secret: &str) -> Result<Principal, ApiError> {
        let hash = hash_secret(secret);
        if let Some((p, at)) = self.cache.lock().ok().and_then(|c| c.get(&hash).cloned())
            && at.elapsed() < CACHE_FOR
        {
            return Ok(p);
        }
        let token = store.find_api_token(&hash).await?;
        let Some(token) = token.filter(|t| t.is_live()) else {
            return Err(ApiError::unauthorized("the token is unknown or revoked"));
        };
        let p = Principal { name: token.name, scopes: token.scopes };
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_MAX {
                c.clear();
            }
            c.insert(hash, (p.clone(), Instant::now()));
        }
        Ok(p)
    }
}

/// The middleware: finds the caller's principal and puts it in the request for the handlers.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    if OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let principal = match state.auth.mode() {
        AuthMode::Disabled => Ok(Principal { name: "anonymous".into(), scopes: Scopes::of(Scope::ALL) }),
        AuthMode::Tokens => match bearer(&req) {
            Err(e) => Err(e),
            Ok(secret) => state.auth.principal(state.store().as_ref(), secret).await,
        },
    };
    match principal {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => {
            let challenge = e.status == axum::http::StatusCode::UNAUTHORIZED;
            let mut r = e.into_response();
            if challenge {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            r
        }
    }
}

fn bearer(req: &Request) -> Result<&str, ApiError> {
    let value = req
        .headers()
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("send a token: Authorization: Bearer <token>"))?;
    let value = value.to_str().map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
    let (kind, secret) = value.split_once(' ').unwrap_or((value, ""));
    if !kind.eq_ignore_ascii_case("bearer") || secret.trim().is_empty() {
        return Err(ApiError::unauthorized("use Authorization: Bearer <token>"));
    }
    Ok(secret.trim())
}
