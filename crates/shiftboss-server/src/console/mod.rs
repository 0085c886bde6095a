//! The operator's console (issue 20): server-rendered pages at `/` and under `/console/`, every
//! asset in the binary, behind the API's own tokens.
//!
//! Sessions: the login page takes a token; its secret goes into a cookie (`HttpOnly`,
//! `SameSite=Strict`, `Secure` when served over TLS, `Path=/`) and every page checks it as the API
//! checks a bearer token, so a revoked token ends its sessions within the API's cache time, and
//! any serve process behind a balancer accepts it. Nothing is kept per session on the server.
//! Every action is a POST with a CSRF token: the SHA-256 of a fixed label and the session's
//! secret, which a page of another site can neither read nor compute; it is compared in constant
//! time. A GET of the API may use the session cookie instead of a bearer token (so that the
//! browser's `EventSource` can follow the event streams); a POST of the API may not.

mod actions;
mod bulk;
pub mod charts;
mod deliveries;
mod find;
pub mod html;
mod jobs;
pub mod pages;
pub mod why;
mod workflows;

use crate::auth::Principal;
use crate::state::AppState;
use axum::Router;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use shiftboss_core::token::{Scope, hash_secret};

/// The session cookie's name.
pub const COOKIE: &str = "shiftboss_session";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(pages::overview))
        .route("/console/login", get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route("/console/tasks", get(pages::tasks))
        .route("/console/find", get(find::find))
        .route("/console/tasks/{id}", get(pages::task))
        .route("/console/tasks/{id}/act", get(actions::confirm).post(actions::act))
        .route("/console/bulk", get(bulk::dry_run).post(bulk::act))
        .route("/console/workflows", get(workflows::list))
        .route("/console/jobs", get(jobs::list))
        .route("/console/jobs/resubmit", get(jobs::confirm).post(jobs::resubmit))
        .route("/console/workflows/{name}", get(workflows::show))
        .route("/console/deliveries", get(deliveries::list))
        .route("/console/deliveries/redeliver", get(deliveries::confirm).post(deliveries::redeliver))
        .route("/console/static/console.css", get(|| async { asset("text/css", html::CSS) }))
        .route("/console/static/console.js", get(|| async { asset("text/javascript", html::JS) }))
}

fn asset(ct: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, ct), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// The session's secret, from the cookie.
pub fn session_secret(headers: &HeaderMap) -> Option<String> {
    for v in headers.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for part in v.split(';') {
            if let Some((k, val)) = part.trim().split_once('=')
                && k == COOKIE
                && !val.is_empty()
            {
                return Some(val.to_owned());
            }
        }
    }
    None
}

/// The CSRF token of a session.
pub fn csrf_of(secret: &str) -> String {
    hash_secret(&format!("shiftboss console csrf\0{secret}"))
}

/// Constant-time equality of two tokens.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who is signed in, with the session's CSRF token.
pub struct Session {
    pub principal: Principal,
    pub csrf: String,
}

/// Why a page is refused: no session (to the login page), or a session without the scope.
pub enum Refused {
    SignIn,
    Forbidden(String),
    Csrf,
    Store(crate::error::ApiError),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::SignIn => Redirect::to("/console/login").into_response(),
            Refused::Forbidden(why) => (
                StatusCode::FORBIDDEN,
                axum::response::Html(html::page(
                    "Not allowed",
                    None,
                    &format!("<h1>Not allowed</h1><p>{}</p>", html::esc(&why)),
                )),
            )
                .into_response(),
            Refused::Csrf => (
                StatusCode::FORBIDDEN,
                axum::response::Html(html::page(
                    "Refused",
                    None,
                    "<h1>Refused</h1><p>The form's CSRF token is missing or wrong: reload the page and try again.</p>",
                )),
            )
                .into_response(),
            Refused::Store(e) => e.into_response(),
        }
    }
}

impl From<crate::error::ApiError> for Refused {
    fn from(e: crate::error::ApiError) -> Self {
        Refused::Store(e)
    }
}

impl From<shiftboss_store::StoreError> for Refused {
    fn from(e: shiftboss_store::StoreError) -> Self {
        Refused::Store(e.into())
    }
}

/// The session of a request, with the scope a page needs.
pub async fn session(state: &AppState, headers: &HeaderMap, scope: Scope) -> Result<Session, Refused> {
    let principal = match state.auth.mode() {
        crate::auth::AuthMode::Disabled => {
            Principal { name: "anonymous".into(), scopes: shiftboss_core::token::Scopes::of(Scope::ALL) }
        }
        crate::auth::AuthMode::Tokens => {
            let secret = session_secret(headers).ok_or(Refused::SignIn)?;
            state.auth.principal(state.store().as_ref(), &secret).await.map_err(|_| Refused::SignIn)?
        }
    };
    principal.require(scope).map_err(|e| Refused::Forbidden(e.detail.clone()))?;
    let csrf = csrf_of(&session_secret(headers).unwrap_or_default());
    Ok(Session { principal, csrf })
}

/// Refuses a form whose CSRF token is not the session's.
pub fn check_csrf(s: &Session, given: Option<&str>) -> Result<(), Refused> {
    match given {
        Some(g) if same(g, &s.csrf) => Ok(()),
        _ => Err(Refused::Csrf),
    }
}

async fn login_page() -> Response {
    login_form(None).into_response()
}

fn login_form(error: Option<&str>) -> axum::response::Html<String> {
    let error = error.map(|e| format!(r#"<p class="error" role="alert">{}</p>"#, html::esc(e))).unwrap_or_default();
    axum::response::Html(html::page(
        "Sign in",
        None,
        &format!(
            r#"<h1>Sign in</h1>{error}<form method="post" action="/console/login" class="filters">
<label>API token<input type="password" name="token" autocomplete="current-password" required autofocus size="50"></label>
<button>Sign in</button></form><p class="muted">A token made with <code>shiftboss tokens create</code>; pages need scope <code>read</code>, actions <code>operate</code>.</p>"#
        ),
    ))
}

#[derive(Deserialize)]
struct Login {
    token: String,
}

async fn login(State(state): State<AppState>, headers: HeaderMap, Form(f): Form<Login>) -> Response {
    let token = f.token.trim();
    if token.is_empty() || token.len() > 200 || token.contains([';', ',', ' ', '"', '\\']) {
        return (StatusCode::UNAUTHORIZED, login_form(Some("That is not a token."))).into_response();
    }
    match state.auth.principal(state.store().as_ref(), token).await {
        Ok(p) if p.scopes.allows(Scope::Read) => {
            let secure = if over_tls(&headers) { "; Secure" } else { "" };
            let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict{secure}");
            let mut r = Redirect::to("/").into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Ok(_) => (StatusCode::FORBIDDEN, login_form(Some("This token lacks the read scope."))).into_response(),
        Err(_) => (StatusCode::UNAUTHORIZED, login_form(Some("Unknown or revoked token."))).into_response(),
    }
}

/// Served over TLS: a proxy in front says so (serve itself speaks plain HTTP).
fn over_tls(headers: &HeaderMap) -> bool {
    headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

#[derive(Deserialize)]
struct Csrf {
    csrf: Option<String>,
}

async fn logout(State(state): State<AppState>, headers: HeaderMap, Form(f): Form<Csrf>) -> Result<Response, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    check_csrf(&s, f.csrf.as_deref())?;
    let mut r = Redirect::to("/console/login").into_response();
    let gone = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&gone) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(r)
}
