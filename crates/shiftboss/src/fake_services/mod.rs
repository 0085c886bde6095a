//! The demo's remote services: stock, payment and shipping. Real HTTP servers on loopback that
//! misbehave on purpose at configurable rates, and that keep every effect they apply, by
//! idempotency key, in a ledger of their own (`ledger.rs`), as a real service keeps its own
//! database. `shiftboss demo` runs them, and so does the chaos harness of `shiftboss-lab`.
//!
//! A request whose key was seen before gets the first answer again and applies nothing (the
//! service honours idempotency keys). An effect applied twice for one order under two different
//! keys would mean the engine lost track of a step: the summary counts those, and they must be 0.

pub mod ledger;

pub use ledger::Ledger;

use anyhow::Context;
use axum::Router;
use axum::extract::{Path as AxumPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How often each kind of fault happens, per request.
#[derive(Debug, Clone, Copy)]
pub struct FaultRates {
    /// Answer 503 without doing anything: a fault that passes.
    pub transient: f64,
    /// Apply the effect, then answer only after `hang_for`: the reply is lost to a caller whose
    /// deadline passes first.
    pub hang: f64,
    /// Refuse for good (out of stock, card declined, address unknown): a fault that will not pass.
    pub reject: f64,
    pub hang_for: Duration,
}

impl FaultRates {
    pub fn none() -> Self {
        FaultRates { transient: 0.0, hang: 0.0, reject: 0.0, hang_for: Duration::ZERO }
    }
}

struct ServiceState {
    name: &'static str,
    /// What a permanent refusal says.
    refusal: &'static str,
    faults: FaultRates,
    ledger: Arc<Ledger>,
}

/// A running fake service.
pub struct FakeService {
    pub base_url: String,
}

/// Starts one service on `port` (0 for any free port).
pub async fn start(
    name: &'static str,
    refusal: &'static str,
    port: u16,
    faults: FaultRates,
    ledger: Arc<Ledger>,
) -> anyhow::Result<FakeService> {
    let state = Arc::new(ServiceState { name, refusal, faults, ledger });
    let app = Router::new().route("/{action}", post(handle)).with_state(state);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("starting the fake {name} service on 127.0.0.1:{port}"))?;
    let base_url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(service = name, error = %e, "fake service stopped");
        }
    });
    Ok(FakeService { base_url })
}

/// Undo actions: a real service does not refuse to refund a charge it made, so these only ever
/// fail in passing (503s and hangs), never for good.
const UNDO_ACTIONS: [&str; 2] = ["release", "refund"];

async fn handle(
    State(s): State<Arc<ServiceState>>,
    AxumPath(action): AxumPath<String>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned) else {
        return (StatusCode::BAD_REQUEST, "missing Idempotency-Key".into());
    };
    let order_id = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v.get("order_id").and_then(Value::as_str).map(str::to_owned));
    let Some(order_id) = order_id else {
        return (StatusCode::BAD_REQUEST, "body must be a JSON object with an order_id".into());
    };
    let ledger = s.ledger.clone();
    let name = s.name;
    let k = key.clone();
    match tokio::task::spawn_blocking(move || ledger.replay(name, &k)).await {
        Ok(Ok(Some(prior))) => return (StatusCode::OK, prior),
        Ok(Ok(None)) => {}
        _ => return (StatusCode::SERVICE_UNAVAILABLE, "ledger unavailable".into()),
    }
    let roll = fastrand::f64();
    let f = s.faults;
    if roll < f.transient {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("{} is busy, try again", s.name));
    }
    if roll < f.transient + f.reject && !UNDO_ACTIONS.contains(&action.as_str()) {
        return (StatusCode::UNPROCESSABLE_ENTITY, s.refusal.to_owned());
    }
    let response =
        json!({"service": s.name, "order_id": order_id, "ref": format!("{}-{}", s.name, &key[..8.min(key.len())])})
            .to_string();
    let ledger = s.ledger.clone();
    let (name, oid) = (s.name, order_id.clone());
    let applied = tokio::task::spawn_blocking(move || ledger.apply(name, &action, &key, &oid, &response)).await;
    let Ok(Ok(answer)) = applied else {
        return (StatusCode::SERVICE_UNAVAILABLE, "ledger unavailable".into());
    };
    if roll < f.transient + f.reject + f.hang {
        tokio::time::sleep(f.hang_for).await;
    }
    (StatusCode::OK, answer)
}
