//! Status channels (P18) over the API: standing subscriptions (`/v1/subscriptions`) and the
//! deliveries of the outbox (`/v1/deliveries`): what is pending, delivered or dead, and sending a
//! dead one again. A subscription's secret is shown once, when it is made, and never again.

use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::query::{Path, Query};
use crate::state::AppState;
use crate::wire::{self, time};
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiftboss_store::{
    DeliveryQuery, DeliveryRecord, DeliveryState, MAX_DELIVERIES, NewSubscription, Redeliver, SetSubscriptionState,
    SubscriptionRecord, SubscriptionState,
};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_subscription, list_subscriptions))
        .routes(routes!(get_subscription, delete_subscription))
        .routes(routes!(enable_subscription))
        .routes(routes!(disable_subscription))
        .routes(routes!(list_deliveries))
        .routes(routes!(get_delivery))
        .routes(routes!(redeliver))
}

/// A standing subscription to make.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSubscriptionBody {
    /// An `http` or `https` URL.
    pub url: String,
    /// The signing secret (`whsec_` and the base64 of 24 to 64 bytes); default a new random one,
    /// shown in the answer once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Only tasks of this workflow; default every workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The message kinds to send; default all (see the `notify` of a task submission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<String>>,
    /// The operator's words for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A subscription, without its secret.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionView {
    pub id: String,
    pub url: String,
    /// A task's own subscription (made at its submission); absent for a standing one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    pub messages: Vec<String>,
    /// `active` or `disabled`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// The receiver asked (429) to be left alone until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<SubscriptionRecord> for SubscriptionView {
    fn from(s: SubscriptionRecord) -> Self {
        SubscriptionView {
            id: s.id.to_string(),
            url: s.url,
            task_id: s.task_id.map(|t| t.to_string()),
            workflow: s.workflow,
            messages: s.kinds.iter().map(|k| k.as_str().to_owned()).collect(),
            state: s.state.as_str().to_owned(),
            disabled_reason: s.disabled_reason,
            paused_until: s.paused_until.map(time),
            description: s.description,
            created_at: time(s.created_at),
            updated_at: time(s.updated_at),
        }
    }
}

/// A new subscription, and its secret: the only time the secret is shown.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedSubscription {
    pub subscription: SubscriptionView,
    pub secret: String,
}

/// Standing subscriptions, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionList {
    pub items: Vec<SubscriptionView>,
}

/// Why a subscription is disabled.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DisableBody {
    #[serde(default)]
    pub reason: Option<String>,
}

/// One message for one subscription, and what became of it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryView {
    /// Also the message's `webhook-id` (`msg_<id>`).
    pub id: String,
    pub subscription_id: String,
    pub task_id: String,
    pub key: String,
    pub workflow: String,
    pub version: u32,
    /// The message kind (`task.completed`, ...).
    pub message: String,
    /// The message's number among its task's messages.
    pub seq: i64,
    pub event_id: String,
    /// When the change happened.
    pub at: String,
    /// `pending`, `delivered` or `dead`.
    pub state: String,
    pub attempts: u32,
    /// When it is (next) due, while pending.
    pub due_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<DeliveryRecord> for DeliveryView {
    fn from(d: DeliveryRecord) -> Self {
        DeliveryView {
            id: d.id.to_string(),
            subscription_id: d.subscription_id.to_string(),
            task_id: d.task_id.to_string(),
            key: d.task_key,
            workflow: d.workflow,
            version: d.version,
            message: d.kind.as_str().to_owned(),
            seq: d.seq,
            event_id: d.event_id.to_string(),
            at: time(d.at),
            state: d.state.as_str().to_owned(),
            attempts: d.attempts,
            due_at: time(d.due_at),
            last_status: d.last_status,
            last_error: d.last_error,
            delivered_at: d.delivered_at.map(time),
            step: d.step,
            output: d.output.map(|o| serde_json::from_str(&o).unwrap_or(Value::String(o))),
            error: d.error,
        }
    }
}

/// A page of deliveries, newest first; `next` is the `before` of the next page.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryPage {
    pub items: Vec<DeliveryView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct DeliveryParams {
    /// `pending`, `delivered` or `dead`.
    state: Option<String>,
    /// A subscription's id.
    subscription: Option<String>,
    /// A task's id.
    task: Option<String>,
    /// Deliveries with ids below this one (the `next` of the page before).
    before: Option<String>,
    /// 1 to 1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// Deliveries to send again.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeliverBody {
    /// These deliveries (dead or delivered; pending ones are left as they are) ...
    #[serde(default)]
    pub ids: Vec<String>,
    /// ... or every dead delivery of this subscription.
    #[serde(default)]
    pub subscription: Option<String>,
    /// Only say which would be sent again.
    #[serde(default)]
    pub dry_run: bool,
}

/// Which deliveries were (or, dry, would be) sent back to pending.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Redelivered {
    pub ids: Vec<String>,
    pub dry_run: bool,
}

/// The store's form of a subscription to make, and its secret (a new random one when none is
/// given); the message kinds checked. The CLI's store path uses it too.
pub fn new_subscription(b: NewSubscriptionBody) -> Result<(NewSubscription, String), String> {
    let secret = b.secret.unwrap_or_else(shiftboss_engine::dispatcher::sign::new_secret);
    let hook = wire::Webhook { url: b.url, secret: secret.clone(), messages: b.messages };
    let target = hook.to_target()?;
    Ok((NewSubscription { target, workflow: b.workflow, description: b.description }, secret))
}

fn id_of(what: &'static str, s: &str) -> Result<i64, ApiError> {
    s.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| ApiError::not_found(format!("no {what} {s}")))
}

fn param_id(what: &str, s: &str) -> Result<i64, ApiError> {
    s.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| ApiError::invalid(format!("{what}: {s:?} is not an id")))
}

/// Makes a standing subscription: every message of the chosen kinds, of every task (of a
/// workflow), from now on. The answer holds the signing secret, shown this once.
#[utoipa::path(post, path = "/v1/subscriptions", tag = "subscriptions", request_body = NewSubscriptionBody,
    security(("token" = ["admin"])),
    responses((status = 201, body = CreatedSubscription), (status = 422, body = Problem)))]
async fn create_subscription(
    State(state): State<AppState>,
    Json(b): Json<NewSubscriptionBody>,
) -> Result<(StatusCode, Json<CreatedSubscription>), ApiError> {
    let (p, secret) = new_subscription(b).map_err(ApiError::invalid)?;
    let s = state.store().create_subscription(p).await?;
    Ok((StatusCode::CREATED, Json(CreatedSubscription { subscription: s.into(), secret })))
}

/// The standing subscriptions, oldest first (a task's own is read by its id).
#[utoipa::path(get, path = "/v1/subscriptions", tag = "subscriptions",
    security(("token" = ["read"])),
    responses((status = 200, body = SubscriptionList)))]
async fn list_subscriptions(State(state): State<AppState>) -> Result<Json<SubscriptionList>, ApiError> {
    let items = state.store().list_subscriptions().await?.into_iter().map(SubscriptionView::from).collect();
    Ok(Json(SubscriptionList { items }))
}

/// One subscription, standing or a task's own.
#[utoipa::path(get, path = "/v1/subscriptions/{id}", tag = "subscriptions", params(("id" = String, Path)),
    security(("token" = ["read"])),
    responses((status = 200, body = SubscriptionView), (status = 404, body = Problem)))]
async fn get_subscription(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SubscriptionView>, ApiError> {
    let n = id_of("subscription", &id)?;
    let s =
        state.store().get_subscription(n).await?.ok_or_else(|| ApiError::not_found(format!("no subscription {id}")))?;
    Ok(Json(s.into()))
}

/// Deletes a subscription and its undelivered messages (delivered ones stay, for the record).
#[utoipa::path(delete, path = "/v1/subscriptions/{id}", tag = "subscriptions", params(("id" = String, Path)),
    security(("token" = ["admin"])),
    responses((status = 204), (status = 404, body = Problem)))]
async fn delete_subscription(State(state): State<AppState>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let n = id_of("subscription", &id)?;
    if state.store().delete_subscription(n).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no subscription {id}")))
    }
}

/// Enables a subscription again (after a 410 from its receiver, or an operator's disable); its
/// undelivered messages are sent.
#[utoipa::path(post, path = "/v1/subscriptions/{id}/enable", tag = "subscriptions", params(("id" = String, Path)),
    security(("token" = ["admin"])),
    responses((status = 200, body = SubscriptionView), (status = 404, body = Problem)))]
async fn enable_subscription(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SubscriptionView>, ApiError> {
    let n = id_of("subscription", &id)?;
    let p = SetSubscriptionState { id: n, state: SubscriptionState::Active, reason: None };
    Ok(Json(state.store().set_subscription_state(p).await?.into()))
}

/// Disables a subscription: nothing is sent to it, and messages written meanwhile are not kept
/// for it; what it had not received waits.
#[utoipa::path(post, path = "/v1/subscriptions/{id}/disable", tag = "subscriptions", params(("id" = String, Path)),
    request_body = DisableBody, security(("token" = ["admin"])),
    responses((status = 200, body = SubscriptionView), (status = 404, body = Problem)))]
async fn disable_subscription(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(b): Json<DisableBody>,
) -> Result<Json<SubscriptionView>, ApiError> {
    let n = id_of("subscription", &id)?;
    if b.reason.as_deref().is_some_and(|r| r.len() > 500) {
        return Err(ApiError::invalid("reason: at most 500 bytes"));
    }
    let p = SetSubscriptionState { id: n, state: SubscriptionState::Disabled, reason: b.reason };
    Ok(Json(state.store().set_subscription_state(p).await?.into()))
}

/// Deliveries, newest first, by state, subscription or task.
#[utoipa::path(get, path = "/v1/deliveries", tag = "subscriptions", params(DeliveryParams),
    security(("token" = ["read"])),
    responses((status = 200, body = DeliveryPage), (status = 400, body = Problem)))]
async fn list_deliveries(
    State(state): State<AppState>,
    Query(q): Query<DeliveryParams>,
) -> Result<Json<DeliveryPage>, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_DELIVERIES).contains(&limit) {
        return Err(ApiError::invalid(format!("limit: 1 to {MAX_DELIVERIES}")));
    }
    let st = match q.state.as_deref() {
        None => None,
        Some(s) => Some(
            DeliveryState::parse(s)
                .ok_or_else(|| ApiError::invalid(format!("state: {s:?} is not pending, delivered or dead")))?,
        ),
    };
    let query = DeliveryQuery {
        state: st,
        subscription: q.subscription.as_deref().map(|s| param_id("subscription", s)).transpose()?,
        task: q.task.as_deref().map(|s| param_id("task", s).map(shiftboss_core::TaskId)).transpose()?,
        before: q.before.as_deref().map(|s| param_id("before", s)).transpose()?,
        limit,
    };
    let rows = state.store().list_deliveries(query).await?;
    let next = (rows.len() == limit as usize).then(|| rows.last().map(|d| d.id.to_string())).flatten();
    Ok(Json(DeliveryPage { items: rows.into_iter().map(DeliveryView::from).collect(), next }))
}

/// One delivery.
#[utoipa::path(get, path = "/v1/deliveries/{id}", tag = "subscriptions", params(("id" = String, Path)),
    security(("token" = ["read"])),
    responses((status = 200, body = DeliveryView), (status = 404, body = Problem)))]
async fn get_delivery(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<DeliveryView>, ApiError> {
    let n = id_of("delivery", &id)?;
    let d = state.store().get_delivery(n).await?.ok_or_else(|| ApiError::not_found(format!("no delivery {id}")))?;
    Ok(Json(d.into()))
}

/// Sends deliveries again, attempts counted from zero: the ids given (dead or delivered), or
/// every dead one of a subscription; with `dry_run`, only says which.
#[utoipa::path(post, path = "/v1/deliveries/redeliver", tag = "subscriptions", request_body = RedeliverBody,
    security(("token" = ["operate"])),
    responses((status = 200, body = Redelivered), (status = 422, body = Problem)))]
async fn redeliver(State(state): State<AppState>, Json(b): Json<RedeliverBody>) -> Result<Json<Redelivered>, ApiError> {
    let ids = b.ids.iter().map(|s| param_id("ids", s)).collect::<Result<Vec<_>, _>>()?;
    let subscription = b.subscription.as_deref().map(|s| param_id("subscription", s)).transpose()?;
    let p = Redeliver { ids, subscription, dry_run: b.dry_run };
    let r = state.store().redeliver(p).await?;
    Ok(Json(Redelivered { ids: r.ids.iter().map(i64::to_string).collect(), dry_run: b.dry_run }))
}
