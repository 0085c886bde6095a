//! `POST /api/token`: an SDK configured with a key and a secret trades them for the token it
//! sends as `X-Authorization`. The key is a shiftboss API token's name and the secret its
//! secret; the answer is that same secret (shiftboss keeps no second kind of token, so revoking
//! the API token ends the SDK's access at once). The secret is never logged.

use super::wire::{TokenAnswer, TokenRequest};
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::state::AppState;
use axum::extract::State;
use shiftboss_core::token::hash_secret;

/// Trades a key (a token's name) and a secret (that token's secret) for the token to send as
/// `X-Authorization`: the secret itself. Open: it is how a client gets in.
#[utoipa::path(post, path = "/api/token", tag = "conductor", request_body = TokenRequest,
    responses((status = 200, body = TokenAnswer),
        (status = 401, description = "No live token with this name and secret", body = Problem)))]
pub async fn token(State(state): State<AppState>, Json(r): Json<TokenRequest>) -> Result<Json<TokenAnswer>, ApiError> {
    let refused = || ApiError::unauthorized("keyId and keySecret do not name a live API token");
    if r.key_secret.is_empty() {
        return Err(refused());
    }
    let found = state.store().find_api_token(&hash_secret(&r.key_secret)).await?;
    match found {
        Some(t) if t.is_live() && t.name == r.key_id => Ok(Json(TokenAnswer { token: r.key_secret })),
        _ => Err(refused()),
    }
}
