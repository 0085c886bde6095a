//! The demo's remote services: stock, payment and shipping. Real HTTP servers on loopback that
//! misbehave on purpose at configurable rates, and that keep every effect they apply, by
//! idempotency key, in a SQLite file of their own, as a real service keeps its own database.
//!
//! A request whose key was seen before gets the first answer again and applies nothing (the
//! service honours idempotency keys). An effect applied twice for one order under two different
//! keys would mean the engine lost track of a step: the summary counts those, and they must be 0.

use anyhow::Context;
use axum::Router;
use axum::extract::{Path as AxumPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
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

/// The three services' shared ledger of effects.
pub struct Ledger {
    conn: Mutex<Connection>,
}

impl Ledger {
    pub fn open(path: &Path) -> anyhow::Result<Ledger> {
        let conn =
            Connection::open(path).with_context(|| format!("opening the demo services' ledger {}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS effects_by_action (
                 service TEXT NOT NULL, action TEXT NOT NULL, idempotency_key TEXT NOT NULL,
                 order_id TEXT NOT NULL, response TEXT NOT NULL, applied_at INTEGER NOT NULL,
                 PRIMARY KEY (service, idempotency_key));
             CREATE TABLE IF NOT EXISTS duplicates (service TEXT PRIMARY KEY, dropped INTEGER NOT NULL);",
        )
        .with_context(|| format!("{} is not a demo ledger", path.display()))?;
        Ok(Ledger { conn: Mutex::new(conn) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answer given before for this key, if any; counts the duplicate request.
    fn replay(&self, service: &str, key: &str) -> rusqlite::Result<Option<String>> {
        let c = self.lock();
        let prior: Option<String> = c
            .query_row(
                "SELECT response FROM effects_by_action WHERE service = ?1 AND idempotency_key = ?2",
                [service, key],
                |r| r.get(0),
            )
            .optional()?;
        if prior.is_some() {
            c.execute(
                "INSERT INTO duplicates (service, dropped) VALUES (?1, 1)
                 ON CONFLICT (service) DO UPDATE SET dropped = dropped + 1",
                [service],
            )?;
        }
        Ok(prior)
    }

    /// Applies an effect once per key; returns the answer to give (the first one, if it raced).
    fn apply(
        &self,
        service: &str,
        action: &str,
        key: &str,
        order_id: &str,
        response: &str,
    ) -> rusqlite::Result<String> {
        let c = self.lock();
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        c.execute(
            "INSERT OR IGNORE INTO effects_by_action (service, action, idempotency_key, order_id, response, applied_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![service, action, key, order_id, response, now],
        )?;
        c.query_row(
            "SELECT response FROM effects_by_action WHERE service = ?1 AND idempotency_key = ?2",
            [service, key],
            |r| r.get(0),
        )
    }

    /// Orders whose effect a service applied more than once (under different keys), by service
    /// and action (`payment/refund`).
    pub fn applied_twice(&self) -> rusqlite::Result<Vec<(String, u64)>> {
        let c = self.lock();
        let mut st = c.prepare(
            "SELECT service || '/' || action, count(*) FROM (
                 SELECT service, action, order_id FROM effects_by_action
                 GROUP BY service, action, order_id HAVING count(*) > 1)
             GROUP BY service, action",
        )?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
        rows.collect()
    }

    /// Effects applied of one action (`refund`), counted once per order.
    pub fn orders_with(&self, action: &str) -> rusqlite::Result<u64> {
        self.lock()
            .query_row("SELECT count(DISTINCT order_id) FROM effects_by_action WHERE action = ?1", [action], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as u64)
    }

    /// Repeated requests each service dropped because it had seen their key.
    pub fn duplicates_dropped(&self) -> rusqlite::Result<u64> {
        self.lock()
            .query_row("SELECT coalesce(sum(dropped), 0) FROM duplicates", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
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
