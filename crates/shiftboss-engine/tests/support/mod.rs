//! A real HTTP service on loopback that misbehaves on purpose, for the engine's tests.
//!
//! Each request takes the next behaviour from a script (then answers 200). It records every
//! request's idempotency key, applies an effect once per key, and notices when two requests for
//! the same key are in flight at once.

#![allow(dead_code)]

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Behavior {
    Ok,
    Status(u16),
    /// Apply the effect, then answer only after this long (the caller has given up by then).
    ApplyThenHang(Duration),
}

#[derive(Default)]
pub struct Log {
    pub script: VecDeque<Behavior>,
    /// Every request's idempotency key, in arrival order.
    pub keys: Vec<String>,
    /// Effects applied, by key.
    pub applied: HashMap<String, u32>,
    pub in_flight: HashMap<String, u32>,
    /// Set when two requests with one key were in flight at once.
    pub overlapped: bool,
}

#[derive(Clone)]
pub struct Service {
    pub base: String,
    pub log: Arc<Mutex<Log>>,
}

impl Service {
    pub async fn start(script: Vec<Behavior>) -> Service {
        let log = Arc::new(Mutex::new(Log { script: script.into(), ..Log::default() }));
        let app = Router::new().route("/{*path}", post(handle)).with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Service { base, log }
    }

    pub fn set_script(&self, script: Vec<Behavior>) {
        self.log.lock().unwrap().script = script.into();
    }

    pub fn requests(&self) -> usize {
        self.log.lock().unwrap().keys.len()
    }
}

async fn handle(State(log): State<Arc<Mutex<Log>>>, headers: HeaderMap, body: String) -> (StatusCode, String) {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let behavior = {
        let mut l = log.lock().unwrap();
        l.keys.push(key.clone());
        let n = l.in_flight.entry(key.clone()).or_default();
        *n += 1;
        if *n > 1 {
            l.overlapped = true;
        }
        l.script.pop_front().unwrap_or(Behavior::Ok)
    };
    let out = match behavior {
        Behavior::Ok => {
            *log.lock().unwrap().applied.entry(key.clone()).or_default() += 1;
            (StatusCode::OK, json!({"ok": true, "echo": serde_json::from_str::<Value>(&body).ok()}).to_string())
        }
        Behavior::Status(s) => (StatusCode::from_u16(s).unwrap(), format!("scripted {s}")),
        Behavior::ApplyThenHang(d) => {
            *log.lock().unwrap().applied.entry(key.clone()).or_default() += 1;
            tokio::time::sleep(d).await;
            (StatusCode::OK, json!({"late": true}).to_string())
        }
    };
    *log.lock().unwrap().in_flight.get_mut(&key).unwrap() -= 1;
    out
}

/// The outbound client of tests whose services listen on loopback, which the SSRF guard refuses
/// unless allowed.
pub fn loopback() -> shiftboss_engine::Outbound {
    shiftboss_engine::Outbound::new(&shiftboss_engine::OutboundConfig::allowing_loopback()).unwrap()
}
