//! Deny by default: every route needs a bearer token with the scope that its OpenAPI operation
//! names (`security: token: [scope]`), except the operations that name none (the health probes
//! and the document itself). The document is the one statement of each route's scope: the
//! middleware reads it, so what is documented is what is enforced. The store keeps only a
//! token's hash; a token found is kept in memory for a few seconds, so a revocation takes effect
//! within [`CACHE_FOR`] on every process.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
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
    pub(crate) async fn principal(&self, store: &dyn Store, secret: &str) -> Result<Principal, ApiError> {
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

/// Each operation's scope, by method and route template, as the OpenAPI document states it
/// (`None`: an open operation).
#[derive(Debug, Default)]
pub struct RouteScopes(HashMap<(String, String), Option<Scope>>);

impl RouteScopes {
    /// Reads the scopes from the document (as JSON). An operation that names a scope this build
    /// does not know is refused here, at start, rather than left open.
    pub fn from_doc(doc: &serde_json::Value) -> Result<RouteScopes, String> {
        let mut map = HashMap::new();
        let paths = doc["paths"].as_object().ok_or("the OpenAPI document has no paths")?;
        for (path, item) in paths {
            for (method, op) in item.as_object().into_iter().flatten() {
                let named = op["security"].as_array().and_then(|s| s.first()).and_then(|s| s["token"][0].as_str());
                let scope = match named {
                    None => None,
                    Some(n) => Some(Scope::parse(n).map_err(|e| format!("{method} {path}: {e}"))?),
                };
                map.insert((method.to_ascii_uppercase(), path.clone()), scope);
            }
        }
        Ok(RouteScopes(map))
    }

    /// `None`: not an operation of the document (the router answers 404 or 405); `Some(None)`: open.
    fn of(&self, method: &str, route: &str) -> Option<Option<Scope>> {
        self.0.get(&(method.to_owned(), route.to_owned())).copied()
    }
}

/// The middleware: finds the caller's principal, checks the scope the route needs, and puts the
/// principal in the request for the handlers.
pub async fn authenticate(
    State((state, scopes)): State<(AppState, std::sync::Arc<RouteScopes>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_owned()).unwrap_or_default();
    let needed = match scopes.of(req.method().as_str(), &route) {
        None | Some(None) => return next.run(req).await,
        Some(Some(scope)) => scope,
    };
    let principal = match state.auth.mode() {
        AuthMode::Disabled => Ok(Principal { name: "anonymous".into(), scopes: Scopes::of(Scope::ALL) }),
        AuthMode::Tokens => match bearer(&req) {
            Ok(secret) => state.auth.principal(state.store().as_ref(), secret).await,
            // A read may come from the console's pages with their session cookie instead (a
            // browser's EventSource sends no header); a write never does: it has no CSRF token.
            Err(e) => match (req.method() == axum::http::Method::GET, crate::console::session_secret(req.headers())) {
                (true, Some(secret)) => state.auth.principal(state.store().as_ref(), &secret).await,
                _ => Err(e),
            },
        },
    };
    let principal = principal.and_then(|p| p.require(needed).map(|()| p));
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
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        // Conductor's SDKs send the token (from POST /api/token) bare in X-Authorization.
        return match req.headers().get("x-authorization") {
            Some(v) => {
                let t = v.to_str().map_err(|_| ApiError::unauthorized("the X-Authorization header is not text"))?;
                let t = t.trim();
                let t = t.strip_prefix("Bearer ").unwrap_or(t).trim();
                if t.is_empty() { Err(ApiError::unauthorized("X-Authorization is empty")) } else { Ok(t) }
            }
            None => Err(ApiError::unauthorized("send a token: Authorization: Bearer <token>")),
        };
    };
    let value = value.to_str().map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
    let (kind, secret) = value.split_once(' ').unwrap_or((value, ""));
    if !kind.eq_ignore_ascii_case("bearer") || secret.trim().is_empty() {
        return Err(ApiError::unauthorized("use Authorization: Bearer <token>"));
    }
    Ok(secret.trim())
}
