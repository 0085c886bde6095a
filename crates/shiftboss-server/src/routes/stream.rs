//! Live event streams (issue 18): Server-Sent Events for one task and for every task, read from
//! the event log, so that a client that reconnects with `Last-Event-ID` (or `since`) gets exactly
//! the events after the last one it saw.
//!
//! Bounds: at most `Limits::streams` streams at once (503 beyond), at most `STREAM_PAGE` events
//! read per read, and no buffer for a slow client: the next read happens only when the connection
//! has taken the last batch (the body is pulled, not pushed). A stream lasts at most
//! `Limits::stream_time`, then ends; its client reconnects from its last id. Keep-alive comments
//! every `KEEP_ALIVE` hold proxies open.

use crate::error::{ApiError, Problem};
use crate::query::{Path, Query};
use crate::server::Closing;
use crate::state::AppState;
use crate::wire::{self, Event};
use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use shiftboss_core::TaskId;
use shiftboss_store::stream::{LATEST, MAX_EVENT_KINDS};
use shiftboss_store::{EventFilter, StreamEvent, TaskEvents};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Events read at most per read of the log.
pub const STREAM_PAGE: u32 = 200;
/// A comment line this often while nothing happens.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(task_stream)).routes(routes!(all_stream))
}

/// One event as a stream sends it: the event as `GET /v1/tasks/{id}/events` gives it, with its
/// task's id, key and workflow.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StreamedEvent {
    #[serde(flatten)]
    pub event: Event,
    pub task_id: String,
    pub task_key: String,
    pub workflow: String,
}

impl From<StreamEvent> for StreamedEvent {
    fn from(e: StreamEvent) -> Self {
        let task_id = e.event.task_id.to_string();
        StreamedEvent { event: e.event.into(), task_id, task_key: e.task_key, workflow: e.workflow }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct TaskStreamParams {
    /// Start after this event id (the `Last-Event-ID` header wins when both are given); from
    /// the task's first event when neither is.
    since: Option<String>,
}

/// A task's events as Server-Sent Events: each message's `id` is the event's id, `event` its
/// kind, `data` the event as JSON with the task's id, key and workflow. Past events first, then
/// live ones; the stream ends after the events that leave the task completed, failed, cancelled,
/// compensated or terminated. Reconnect with `Last-Event-ID` to go on where it stopped; 204 when
/// the task has ended and nothing follows that id.
#[utoipa::path(get, path = "/v1/tasks/{id}/events/stream", tag = "tasks",
    params(("id" = String, Path), TaskStreamParams,
        ("Last-Event-ID" = Option<String>, Header, description = "The last event id the client saw")),
    security(("token" = ["read"])),
    responses(
        (status = 200, description = "A stream of events", content_type = "text/event-stream", body = String),
        (status = 204, description = "The task has ended and no event follows the given id"),
        (status = 404, body = Problem),
        (status = 503, body = Problem)))]
async fn task_stream(
    State(state): State<AppState>,
    closing: Option<Extension<Closing>>,
    Path(id): Path<String>,
    Query(q): Query<TaskStreamParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let after = start(&headers, q.since.as_deref())?;
    let task_id = wire::task_id(&id).ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
    let task = find_task(&state, task_id).await?.ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
    if task.state.is_terminal() {
        let next = state.store().task_events(TaskEvents { task_id, after: Some(after), limit: 1 }).await?;
        if next.is_empty() {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
    }
    let permit = state.streams.clone().try_acquire_owned().map_err(|_| busy())?;
    let (key, workflow) = (task.key, task.workflow);
    let events = state.engine.follow(task_id, Some(after)).map(move |e| match e {
        Ok(e) => Ok(message(StreamedEvent {
            task_id: e.task_id.to_string(),
            task_key: key.clone(),
            workflow: workflow.clone(),
            event: Event::from(e),
        })),
        Err(e) => {
            tracing::warn!(error = %e, "event stream: the store failed; the stream ends");
            Err(Ended)
        }
    });
    Ok(respond(events, permit, state.limits.stream_time, closing.map(|c| c.0)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct AllStreamParams {
    /// Start after this event id (the `Last-Event-ID` header wins when both are given); from
    /// events written from now on when neither is.
    since: Option<String>,
    /// Only tasks of this workflow.
    workflow: Option<String>,
    /// Only these kinds of events, comma-separated (`task.completed,step.error`).
    kinds: Option<String>,
    /// Only tasks whose key starts with this text.
    key_prefix: Option<String>,
}

/// Every task's events as Server-Sent Events, with filters (as for one task: `id`, `event`,
/// `data`). From the given id, else from now; it does not end (at most the server's stream time;
/// reconnect with `Last-Event-ID`).
#[utoipa::path(get, path = "/v1/events/stream", tag = "tasks",
    params(AllStreamParams,
        ("Last-Event-ID" = Option<String>, Header, description = "The last event id the client saw")),
    security(("token" = ["read"])),
    responses(
        (status = 200, description = "A stream of events", content_type = "text/event-stream", body = String),
        (status = 503, body = Problem)))]
async fn all_stream(
    State(state): State<AppState>,
    closing: Option<Extension<Closing>>,
    Query(q): Query<AllStreamParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let given = headers.contains_key(LAST_EVENT_ID) || q.since.is_some();
    let after = if given { start(&headers, q.since.as_deref())? } else { LATEST };
    let kinds: Vec<String> = q
        .kinds
        .as_deref()
        .map(|k| k.split(',').map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    if kinds.len() > MAX_EVENT_KINDS {
        return Err(ApiError::invalid(format!("kinds: at most {MAX_EVENT_KINDS}")));
    }
    let filter = EventFilter { task_id: None, workflow: q.workflow, kinds, key_prefix: q.key_prefix };
    filter.validate()?;
    let permit = state.streams.clone().try_acquire_owned().map_err(|_| busy())?;
    let mut follower = state.engine.events(filter, after, STREAM_PAGE);
    if after == LATEST {
        // Fixes "now" before the answer's head goes out: what the client does once it has the
        // head comes after the start.
        follower.read().await?;
    }
    let events = futures_util::stream::unfold(follower, |mut f| async move {
        let next = f.next_events().await;
        Some((next, f))
    });
    let events = events
        .flat_map(|batch| match batch {
            Ok(b) => futures_util::stream::iter(b.into_iter().map(|e| Ok(message(e.into()))).collect::<Vec<_>>()),
            Err(e) => {
                tracing::warn!(error = %e, "event stream: the store failed; the stream ends");
                futures_util::stream::iter(vec![Err(Ended)])
            }
        })
        .take_while(|r| std::future::ready(r.is_ok()));
    Ok(respond(events, permit, state.limits.stream_time, closing.map(|c| c.0)))
}

/// The header a reconnecting `EventSource` sends.
const LAST_EVENT_ID: &str = "last-event-id";

/// The id to start after: `Last-Event-ID`, else `since`, else 0.
fn start(headers: &HeaderMap, since: Option<&str>) -> Result<i64, ApiError> {
    let given = match headers.get(LAST_EVENT_ID) {
        Some(v) => Some(v.to_str().map_err(|_| ApiError::bad_request("Last-Event-ID: not an event id"))?),
        None => since,
    };
    match given.map(str::trim) {
        None | Some("") => Ok(0),
        Some("0") => Ok(0),
        Some(s) => wire::parse_id(s).ok_or_else(|| ApiError::bad_request("Last-Event-ID / since: not an event id")),
    }
}

async fn find_task(state: &AppState, id: TaskId) -> Result<Option<shiftboss_core::model::TaskRecord>, ApiError> {
    let store = state.store();
    if let Some(d) = store.get_task_head(id, false, 0).await? {
        return Ok(Some(d.task));
    }
    Ok(store.get_task_head(id, true, 0).await?.map(|d| d.task))
}

fn busy() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "too_many_streams", "too many event streams are open; retry later")
}

/// The store failed: the stream ends (the client reconnects from its last id).
#[derive(Debug)]
struct Ended;

fn message(e: StreamedEvent) -> sse::Event {
    let id = e.event.id.clone();
    let kind = e.event.kind.clone();
    let data = serde_json::to_string(&e).unwrap_or_else(|_| "{}".into());
    sse::Event::default().id(id).event(kind).data(data)
}

/// The SSE answer: the events until the stream ends, its time is up or the store fails, with
/// keep-alive comments; the permit is held as long as the stream lives. It ends too when the
/// server stops.
fn respond(
    events: impl Stream<Item = Result<sse::Event, Ended>> + Send + 'static,
    permit: OwnedSemaphorePermit,
    time: Duration,
    closing: Option<Closing>,
) -> Response {
    let deadline = tokio::time::sleep_until(tokio::time::Instant::now() + time);
    let end = async move {
        match closing {
            Some(c) => tokio::select! { _ = deadline => {}, _ = c.wait() => {} },
            None => deadline.await,
        }
    };
    let events = events
        .take_while(|r| std::future::ready(r.is_ok()))
        .map(move |r| {
            let _held = &permit;
            Ok::<_, Infallible>(r.unwrap_or_else(|_| sse::Event::default()))
        })
        .take_until(end);
    Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_last_event_id_then_since_then_zero() {
        let mut h = HeaderMap::new();
        assert_eq!(start(&h, None).unwrap(), 0);
        assert_eq!(start(&h, Some("7")).unwrap(), 7);
        h.insert(LAST_EVENT_ID, "9".parse().unwrap());
        assert_eq!(start(&h, Some("7")).unwrap(), 9);
        h.insert(LAST_EVENT_ID, "x".parse().unwrap());
        assert!(start(&h, None).is_err());
        assert!(start(&HeaderMap::new(), Some("-3")).is_err());
    }
}
