//! The sinks an alert goes to: the log, a webhook (JSON, signed with Standard Webhooks when it has
//! a secret), a chat webhook (Slack's `{"text": ...}` form). Each runs on its own task behind a
//! bounded queue, so a sink that hangs or fails holds up only itself: when its queue is full, new
//! alerts for it are dropped and counted, never waited for.
//!
//! A sink's URL may carry a token in its path (chat webhooks do), so it is never logged: errors
//! name the sink, and any text of the URL is scrubbed from them.

use super::alert::Alert;
use crate::dispatcher::StoreClock;
use crate::dispatcher::sign;
use crate::outbound::{Body, Outbound, Request};
use reqwest::{Method, Url};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Where a sink sends. Its `Debug` names the kind only: a URL may hold a token and the secret
/// signs, so neither may reach a log line that prints a config.
#[derive(Clone, PartialEq)]
pub enum SinkKind {
    /// A `warn` line on the `shiftboss::alert` target of the process's log.
    Log,
    /// A POST of the alert as JSON; signed when a `whsec_` secret is set.
    Webhook { url: Url, secret: Option<String> },
    /// A POST of `{"text": "..."}`, as chat tools' incoming webhooks take it.
    Chat { url: Url },
}

impl std::fmt::Debug for SinkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SinkKind::Log => f.write_str("Log"),
            SinkKind::Webhook { secret, .. } => {
                f.debug_struct("Webhook").field("url", &"<hidden>").field("signed", &secret.is_some()).finish()
            }
            SinkKind::Chat { .. } => f.debug_struct("Chat").field("url", &"<hidden>").finish(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SinkConfig {
    /// How logs and metrics name it.
    pub name: String,
    pub kind: SinkKind,
}

impl SinkConfig {
    pub fn log() -> SinkConfig {
        SinkConfig { name: "log".into(), kind: SinkKind::Log }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.len() > 100 || self.name.chars().any(char::is_control) {
            return Err("an alert sink's name is 1 to 100 characters, no control characters".into());
        }
        match &self.kind {
            SinkKind::Webhook { url, secret } => {
                check_url(&self.name, url)?;
                if let Some(s) = secret
                    && !shiftboss_store::webhooks::valid_secret(s)
                {
                    return Err(format!("alert sink {}: the secret is whsec_ and base64 of 24 to 64 bytes", self.name));
                }
                Ok(())
            }
            SinkKind::Chat { url } => check_url(&self.name, url),
            SinkKind::Log => Ok(()),
        }
    }
}

fn check_url(name: &str, url: &Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("alert sink {name}: the url must be http or https with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("alert sink {name}: no user or password in the url (use a secret)"));
    }
    Ok(())
}

/// What the sinks did, for `/metrics`.
#[derive(Debug, Default)]
pub struct AlertCounters {
    /// Alerts raised (first ones and folded summaries), before any sink.
    pub raised: AtomicU64,
    /// Repeats held back to be folded into a summary.
    pub folded: AtomicU64,
    pub sent: AtomicU64,
    /// Given up after the sink's tries, or refused for good by its receiver.
    pub failed: AtomicU64,
    /// Dropped because the sink's queue was full.
    pub dropped: AtomicU64,
}

/// Tries of one alert on a failing webhook, and the pauses between them.
const PAUSES: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(5), Duration::from_secs(30)];

/// A running sink.
pub struct Sink {
    name: String,
    queue: mpsc::Sender<(u64, Alert)>,
    /// The lowest event id of each alert queued and not yet done, by its place in the queue.
    pending: Arc<Mutex<BTreeMap<u64, i64>>>,
    next: u64,
    counters: Arc<AlertCounters>,
    worker: tokio::task::JoinHandle<()>,
}

impl Sink {
    pub(crate) fn start(
        config: SinkConfig,
        outbound: Outbound,
        capacity: usize,
        timeout: Duration,
        clock: StoreClock,
        counters: Arc<AlertCounters>,
    ) -> Sink {
        let (queue, mut rx) = mpsc::channel::<(u64, Alert)>(capacity.max(1));
        let pending = Arc::new(Mutex::new(BTreeMap::new()));
        let (done, name, c) = (pending.clone(), config.name.clone(), counters.clone());
        let worker = tokio::spawn(async move {
            while let Some((place, alert)) = rx.recv().await {
                let n = if send(&config, &outbound, &alert, timeout, clock).await { &c.sent } else { &c.failed };
                n.fetch_add(1, Ordering::Relaxed);
                done.lock().unwrap_or_else(|p| p.into_inner()).remove(&place);
            }
        });
        Sink { name, queue, pending, next: 0, counters, worker }
    }

    /// Queues an alert, or drops it when the queue is full.
    pub fn offer(&mut self, alert: Alert) {
        let place = self.next;
        self.next += 1;
        if let Some((low, _)) = alert.events {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(place, low);
        }
        if self.queue.try_send((place, alert)).is_err() {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&place);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(sink = %self.name, "alert sink: its queue is full (it is slow or failing); an alert was dropped");
        }
    }

    /// The lowest event id an alert still in this sink's queue stands for.
    pub fn oldest_pending(&self) -> Option<i64> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).values().min().copied()
    }

    /// Lets the queue drain within `bound`, then stops. True when it drained.
    pub async fn stop(self, bound: Duration) -> bool {
        drop(self.queue);
        let mut worker = self.worker;
        if tokio::time::timeout(bound, &mut worker).await.is_err() {
            tracing::warn!(sink = %self.name, "alert sink: alerts still queued at shutdown were not sent");
            worker.abort();
            return false;
        }
        true
    }
}

/// Sends one alert, with a few tries on a webhook that fails for a while. True when it went out.
async fn send(config: &SinkConfig, outbound: &Outbound, alert: &Alert, timeout: Duration, clock: StoreClock) -> bool {
    let (url, body, secret) = match &config.kind {
        SinkKind::Log => {
            tracing::warn!(
                target: "shiftboss::alert",
                kind = %alert.kind,
                subject = %alert.subject,
                count = alert.count,
                folded = alert.folded,
                "{}",
                alert.text()
            );
            return true;
        }
        SinkKind::Webhook { url, secret } => (url, alert.webhook_body(), secret.as_deref()),
        SinkKind::Chat { url } => (url, alert.chat_body(), None),
    };
    let text = body.to_string();
    let id = message_id(alert);
    for (attempt, pause) in std::iter::once(Duration::ZERO).chain(PAUSES).enumerate() {
        tokio::time::sleep(pause).await;
        let mut req = Request::new(Method::POST, url.clone());
        req.plain_headers = vec![("user-agent".into(), concat!("shiftboss/", env!("CARGO_PKG_VERSION")).into())];
        if let Some(secret) = secret {
            let stamp = clock.now().0 / 1000;
            match sign::signature(secret, &id, stamp, text.as_bytes()) {
                Ok(sig) => req.plain_headers.extend([
                    ("webhook-id".into(), id.clone()),
                    ("webhook-timestamp".into(), stamp.to_string()),
                    ("webhook-signature".into(), sig),
                ]),
                Err(e) => {
                    tracing::warn!(sink = %config.name, error = %e, "alert sink: cannot sign");
                    return false;
                }
            }
        }
        req.body = Body::Text { content_type: "application/json".into(), text: text.clone() };
        req.timeout = Some(timeout);
        let (problem, again) = match outbound.call(req).await {
            Ok(r) if r.status.is_success() => return true,
            Ok(r) => {
                let s = r.status.as_u16();
                (format!("HTTP {s}"), s == 429 || s >= 500)
            }
            Err(e) => (scrub(&e.to_string(), url), e.is_transient()),
        };
        tracing::warn!(sink = %config.name, attempt = attempt + 1, error = %problem, "alert sink: sending failed");
        if !again {
            break;
        }
    }
    false
}

/// The id a receiver dedupes on: the same for every try of one alert.
fn message_id(a: &Alert) -> String {
    let events = a.events.map(|(lo, hi)| format!("{lo}_{hi}")).unwrap_or_else(|| {
        let task = a.tasks.first().map_or(0, |t| t.id);
        format!("stuck_{task}_{}", a.first_at.0)
    });
    format!("alert_{events}")
}

/// An error text without the sink's URL (or its path, where a token may live).
fn scrub(text: &str, url: &Url) -> String {
    let mut out = text.replace(url.as_str(), "[sink url]");
    if url.path().len() > 1 {
        out = out.replace(url.path(), "/[path]");
    }
    if let Some(q) = url.query() {
        out = out.replace(q, "[query]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_users_or_other_schemes_are_refused() {
        let s = |u: &str| SinkConfig { name: "ops".into(), kind: SinkKind::Chat { url: Url::parse(u).unwrap() } };
        assert!(s("https://hooks.example.com/services/T0/B0/xyz").validate().is_ok());
        assert!(s("https://user:pw@hooks.example.com/x").validate().is_err());
        assert!(s("ftp://hooks.example.com/x").validate().is_err());
        let bad_secret = SinkConfig {
            name: "ops".into(),
            kind: SinkKind::Webhook { url: Url::parse("https://a.example/x").unwrap(), secret: Some("nope".into()) },
        };
        assert!(bad_secret.validate().is_err());
    }

    #[test]
    fn errors_lose_the_url() {
        let url = Url::parse("https://hooks.example.com/services/T0/B0/s3cr3t?token=abc").unwrap();
        let e = format!("connection failed: error sending request for url ({url})");
        let out = scrub(&e, &url);
        assert!(!out.contains("s3cr3t") && !out.contains("abc"), "{out}");
    }
}
