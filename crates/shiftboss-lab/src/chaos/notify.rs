//! Status channels under chaos: a standing subscription to every order's messages, and a receiver
//! in the harness (so it outlives every worker's death) that answers 500 to every fifth request
//! and holds every 40th past the dispatcher's call timeout. After the tasks end, the harness waits
//! for the outbox to drain while the workers still run; then every message the store wrote for
//! every acknowledged task must have been received at least once: "notifications lost 0".

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::Value;
use shiftboss_store::webhooks::MessageKind;
use shiftboss_store::{DeliveryQuery, DeliveryState, NewSubscription, Store, TaskDetail, WebhookTarget};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The dispatcher's settings for the run: short calls and leases, and retries every 200 ms for
/// as long as the run lasts, so that a message's fate is known before the run ends.
pub const WORKER_CONFIG: &str = r#"[webhooks]
call_timeout = "1s"
lease = "3s"
idle_poll = "200ms"
retry = { kind = "fixed", delay = "200ms", max_failures = 100000 }

[alerts]
stuck_after = "0s"
"#;

/// The signing secret of the run's subscription.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[derive(Default)]
struct Received {
    /// The `seq` of every message accepted (answered 2xx), by task key.
    by_key: Mutex<HashMap<String, BTreeSet<u64>>>,
    requests: AtomicU64,
    accepted: AtomicU64,
}

pub struct Receiver {
    pub url: String,
    got: Arc<Received>,
}

/// What the notifications came to.
#[derive(Debug, Default)]
pub struct NotifyFigures {
    /// Messages the store wrote for the acknowledged tasks.
    pub expected: u64,
    /// Of those, never accepted by the receiver.
    pub lost: u64,
    /// Requests the receiver saw, and those it accepted (repeats included).
    pub requests: u64,
    pub accepted: u64,
    /// Deliveries given up (dead) at the end; none may be.
    pub dead: u64,
    /// Deliveries still pending when the drain's time ran out.
    pub pending: u64,
    pub drained_in: Duration,
}

impl Receiver {
    pub async fn start() -> anyhow::Result<Receiver> {
        let got = Arc::new(Received::default());
        let app = Router::new().route("/hook", post(receive)).with_state(got.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "chaos receiver stopped");
            }
        });
        Ok(Receiver { url, got })
    }

    /// The standing subscription to every message of every order.
    pub async fn subscribe(&self, store: &dyn Store) -> anyhow::Result<()> {
        let target = WebhookTarget { url: self.url.clone(), secret: SECRET.into(), kinds: Vec::new() };
        let p = NewSubscription { target, workflow: Some("order".into()), description: Some("chaos".into()) };
        store.create_subscription(p).await?;
        Ok(())
    }

    /// Every acknowledged task's messages, against what arrived.
    pub fn audit(&self, details: &[Option<TaskDetail>], figures: &mut NotifyFigures) {
        let got = self.got.by_key.lock().unwrap_or_else(|p| p.into_inner());
        for d in details.iter().flatten() {
            let n = d.events.iter().filter(|e| MessageKind::of_event(&e.kind).is_some()).count() as u64;
            figures.expected += n;
            let seen = got.get(&d.task.key);
            figures.lost += (1..=n).filter(|s| !seen.is_some_and(|set| set.contains(s))).count() as u64;
        }
        figures.requests = self.got.requests.load(Ordering::Relaxed);
        figures.accepted = self.got.accepted.load(Ordering::Relaxed);
    }
}

async fn receive(State(got): State<Arc<Received>>, body: String) -> StatusCode {
    let n = got.requests.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_multiple_of(5) {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    if n.is_multiple_of(40) {
        // Past the dispatcher's call timeout: it counts as failed there, and is sent again.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        return StatusCode::OK;
    }
    let Ok(msg) = serde_json::from_str::<Value>(&body) else { return StatusCode::BAD_REQUEST };
    let data = &msg["data"];
    let (Some(key), Some(seq)) = (data["key"].as_str(), data["seq"].as_u64()) else {
        return StatusCode::BAD_REQUEST;
    };
    got.by_key.lock().unwrap_or_else(|p| p.into_inner()).entry(key.to_owned()).or_default().insert(seq);
    got.accepted.fetch_add(1, Ordering::Relaxed);
    StatusCode::OK
}

/// Waits until no delivery is pending, or `within` passes; counts what is left, dead or pending.
pub async fn drain(store: &dyn Store, within: Duration, figures: &mut NotifyFigures) {
    let started = Instant::now();
    let count = async |state: DeliveryState| -> Option<u64> {
        let q = DeliveryQuery { state: Some(state), subscription: None, task: None, before: None, limit: 1000 };
        store.list_deliveries(q).await.ok().map(|l| l.len() as u64)
    };
    loop {
        if count(DeliveryState::Pending).await == Some(0) || started.elapsed() >= within {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    figures.drained_in = started.elapsed();
    figures.pending = count(DeliveryState::Pending).await.unwrap_or(u64::MAX);
    figures.dead = count(DeliveryState::Dead).await.unwrap_or(u64::MAX);
}

/// The workers' config file, in the work directory.
pub fn write_config(workdir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let path = workdir.join("chaos-worker.toml");
    std::fs::write(&path, WORKER_CONFIG)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::audit::tests::{event, task};
    use serde_json::json;
    use shiftboss_store::event_kind as ev;

    #[test]
    fn a_message_that_never_arrived_is_lost_and_a_repeat_is_not_counted_twice() {
        // Task "k": received, a step completed, completed (3 messages), and an event that is none.
        let d = task(
            0,
            vec![
                event(1, 0, ev::TASK_RECEIVED, json!({})),
                event(2, 0, ev::STEP_CLAIMED, json!({})),
                event(3, 0, ev::STEP_PROCESSED, json!({})),
                event(4, 0, ev::TASK_COMPLETED, json!({})),
            ],
        );
        let got = Arc::new(Received::default());
        let receiver = Receiver { url: String::new(), got: got.clone() };
        got.by_key.lock().unwrap().insert("k".into(), [1, 3].into_iter().collect());
        let mut f = NotifyFigures::default();
        receiver.audit(&[Some(d.clone())], &mut f);
        assert_eq!((f.expected, f.lost), (3, 1), "seq 2 never arrived");
        got.by_key.lock().unwrap().get_mut("k").unwrap().insert(2);
        let mut f = NotifyFigures::default();
        receiver.audit(&[Some(d)], &mut f);
        assert_eq!((f.expected, f.lost), (3, 0));
    }
}
