//! The dispatcher (P18): sends the outbox's deliveries to their subscriptions' webhooks, signed
//! (Standard Webhooks), at least once, and records what became of each.
//!
//! The store writes a delivery in the transaction of each message's event (see
//! `shiftboss_store::webhooks`); the dispatcher claims due deliveries the way a scheduler claims
//! steps: each claim counts an attempt, makes the row due again after a lease, and bumps a fencing
//! token, so any number of dispatchers (one per `serve` process) share the outbox without taking
//! one row twice, and a dispatcher killed mid-send loses nothing: its rows fall due again when the
//! lease lapses and another (or the same, restarted) sends them. A receiver may therefore see a
//! message twice (the id in `webhook-id` is the same); it never misses one.
//!
//! Every call goes out through [`Outbound`]: the SSRF guard refuses private, loopback and
//! link-local targets unless the allow-list opens them. A call is bounded by `call_timeout`, so a
//! receiver that hangs holds one slot for that long and nothing else.

pub mod message;
pub mod sign;
pub mod verdict;

use crate::outbound::{Body, Outbound, Request};
use reqwest::{Method, Url};
use shiftboss_core::Timestamp;
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::time::duration_ms;
use shiftboss_store::{
    ClaimDeliveries, ClaimedDeliveries, ClaimedDelivery, DeliveryOutcome, DeliveryResult, Store, StoreError,
    Subscription,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The longest a finished delivery waits to be recorded with others, and a claim to be made with
/// more free slots, while deliveries are in flight.
const GATHER: Duration = Duration::from_millis(10);

/// A claim starts this far before where the last one left off (`ClaimDeliveries::due_from`): a
/// transaction that began before that point and commits after it may still write a delivery due
/// there.
const FLOOR_MARGIN: Duration = Duration::from_secs(1);

/// A claim starts from the front of the queue at least this often, to take what claims from the
/// floor pass over: a delivery committed later than the margin allows, a pause's end, a backlog of
/// a subscription enabled again, a row another dispatcher's claim held and let go.
const FROM_FRONT_EVERY: Duration = Duration::from_secs(1);

/// The dispatcher's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchConfig {
    /// Deliveries in flight at once.
    pub concurrency: usize,
    /// A claimed delivery is due again after this, should its dispatcher die mid-send; longer
    /// than `call_timeout`.
    pub lease: Duration,
    /// The longest one attempt takes (connect, send, the receiver's answer).
    pub call_timeout: Duration,
    /// When to try again after a failed attempt, and when to give up (dead, with an alert). The
    /// default stretches over about three days, as the big webhook senders' schedules do.
    pub retry: RetryPolicy,
    /// The longest the dispatcher sleeps with nothing due: a safety net for a lost ring.
    pub idle_poll: Duration,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        let m = |n: u64| Duration::from_secs(60 * n);
        DispatchConfig {
            concurrency: 64,
            lease: Duration::from_secs(60),
            call_timeout: Duration::from_secs(15),
            retry: RetryPolicy::Intervals {
                // 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, 14 h, 20 h, 24 h: about 3.6 days in all.
                intervals: vec![
                    Duration::from_secs(5),
                    m(5),
                    m(30),
                    m(120),
                    m(300),
                    m(600),
                    m(600),
                    m(840),
                    m(1200),
                    m(1440),
                ],
                max_failures: None,
            },
            // As the scheduler's: the store rings sooner, and each look is a transaction.
            idle_poll: Duration::from_secs(10),
        }
    }
}

impl DispatchConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.concurrency == 0 || self.idle_poll.is_zero() || self.call_timeout.is_zero() {
            return Err("webhook concurrency, idle poll and call timeout must be more than 0".into());
        }
        if self.lease <= self.call_timeout {
            return Err("the webhook claim lease must be longer than the call timeout".into());
        }
        self.retry.validate().map_err(|e| format!("webhook retry policy: {e}"))
    }
}

/// What the dispatcher did, for `/metrics`.
#[derive(Debug, Default)]
pub struct DispatchCounters {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub dead: AtomicU64,
    pub throttled: AtomicU64,
    pub gone: AtomicU64,
}

pub struct Dispatcher {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) outbound: Outbound,
    pub(crate) config: DispatchConfig,
    pub(crate) counters: Arc<DispatchCounters>,
}

impl Dispatcher {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let bell = Arc::new(Notify::new());
        let ring = bell.clone();
        let _subscription: Subscription = self.store.subscribe_deliveries(Arc::new(move || ring.notify_one()));
        let mut inflight: JoinSet<DeliveryOutcome> = JoinSet::new();
        let mut backoff = Duration::from_millis(100);
        let mut failures = crate::throttle::Throttle::new(crate::throttle::EVERY);
        // Outcomes not recorded yet, since when, and when the last claim was made: under load,
        // claims and records gather into batches (a transaction per delivery each way would bound
        // the dispatcher by the store's commit rate), never held longer than GATHER.
        let mut done: Vec<DeliveryOutcome> = Vec::new();
        let mut first_done: Option<Instant> = None;
        let mut last_claim: Option<Instant> = None;
        // Where claims start, and when one starts from the front again.
        let mut floor: Option<Timestamp> = None;
        let mut from_front_at = Instant::now();
        let half = self.config.concurrency.div_ceil(2);
        loop {
            if *shutdown.borrow() {
                break;
            }
            let free = self.config.concurrency.saturating_sub(inflight.len());
            let mut wait = self.config.idle_poll;
            let claim_now = inflight.is_empty() || free >= half || last_claim.is_none_or(|t| t.elapsed() >= GATHER);
            if free > 0 && !claim_now {
                wait = last_claim.map_or(Duration::ZERO, |t| GATHER.saturating_sub(t.elapsed()));
            }
            if free > 0 && claim_now {
                let mut from_front = Instant::now() >= from_front_at;
                let due_from = if from_front { None } else { floor };
                last_claim = Some(Instant::now());
                let mut claimed = self.claim(free, due_from, &mut shutdown).await;
                if due_from.is_some() && matches!(&claimed, Some(Ok(c)) if c.deliveries.is_empty()) {
                    // Woken for nothing past the floor: perhaps a delivery whose transaction
                    // committed later than the margin allows. Looked for at once, not at the
                    // next claim from the front, which a quiet outbox may not make for a while.
                    from_front = true;
                    claimed = self.claim(free, None, &mut shutdown).await;
                }
                match claimed {
                    None => break,
                    Some(Ok(claimed)) => {
                        backoff = Duration::from_millis(100);
                        if let Some(n) = failures.succeeded() {
                            tracing::info!(failures = n, "webhook dispatcher: claims succeed again");
                        }
                        if from_front {
                            from_front_at = Instant::now() + FROM_FRONT_EVERY;
                        }
                        floor = Some(Timestamp(claimed.taken_through.0.saturating_sub(duration_ms(FLOOR_MARGIN))));
                        let full = claimed.deliveries.len() == free;
                        let clock = StoreClock { at_claim: claimed.now, claimed: Instant::now() };
                        for d in claimed.deliveries {
                            let (outbound, timeout) = (self.outbound.clone(), self.config.call_timeout);
                            let policy = self.config.retry.clone();
                            inflight.spawn(async move { attempt(&outbound, d, timeout, &policy, clock).await });
                        }
                        if full {
                            // More may be due: claim again as soon as slots free.
                            wait = GATHER;
                        } else if let Some(next) = claimed.next_due {
                            wait = next.min(self.config.idle_poll);
                        }
                    }
                    Some(Err(e)) => {
                        if let Some(held) = failures.failed(Instant::now()) {
                            tracing::warn!(error = %e, not_logged = held, "webhook dispatcher: claiming deliveries failed; trying again (logged once per 10 s while it lasts)");
                        }
                        wait = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
            if let Some(t) = first_done {
                wait = wait.min(GATHER.saturating_sub(t.elapsed()));
            }
            // Sleep until a delivery ends, a ring, the next due time, a batch's time, or shutdown.
            let ended = tokio::select! {
                Some(d) = inflight.join_next(), if !inflight.is_empty() => Some(d),
                _ = bell.notified() => None,
                _ = tokio::time::sleep(wait) => None,
                _ = shutdown.changed() => None,
            };
            if let Some(first) = ended {
                done.extend(first.ok());
                while let Some(more) = inflight.try_join_next() {
                    done.extend(more.ok());
                }
                first_done.get_or_insert_with(Instant::now);
            }
            let gathered =
                done.len() >= half || inflight.is_empty() || first_done.is_some_and(|t| t.elapsed() >= GATHER);
            if !done.is_empty() && gathered {
                self.record(std::mem::take(&mut done)).await;
                first_done = None;
            }
        }
        if !done.is_empty() {
            self.record(std::mem::take(&mut done)).await;
        }
        // What is in flight gets the rest of its call timeout; what is not recorded is sent again
        // after its lease.
        let drain = async {
            let mut done = Vec::new();
            while let Some(d) = inflight.join_next().await {
                done.extend(d.ok());
            }
            self.record(done).await;
        };
        let _ = tokio::time::timeout(self.config.call_timeout + Duration::from_secs(1), drain).await;
    }

    /// Claims up to `free` due deliveries from `due_from`; `None` when shutdown came first.
    async fn claim(
        &self,
        free: usize,
        due_from: Option<Timestamp>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<Result<ClaimedDeliveries, StoreError>> {
        let p = ClaimDeliveries { limit: free as u32, lease: self.config.lease, due_from };
        tokio::select! {
            r = self.store.claim_deliveries(p) => Some(r),
            _ = shutdown.changed() => None,
        }
    }

    /// Records outcomes, a few tries at most: an outcome not recorded only means the delivery is
    /// sent again after its lease.
    async fn record(&self, outcomes: Vec<DeliveryOutcome>) {
        if outcomes.is_empty() {
            return;
        }
        for o in &outcomes {
            let c = &self.counters;
            let n = match o.result {
                DeliveryResult::Delivered { .. } => &c.delivered,
                DeliveryResult::Retry { .. } => &c.failed,
                DeliveryResult::Dead { .. } => &c.dead,
                DeliveryResult::Throttled { .. } => &c.throttled,
                DeliveryResult::Gone { .. } => &c.gone,
            };
            n.fetch_add(1, Ordering::Relaxed);
        }
        for pause in [100, 500, 2000] {
            match self.store.record_deliveries(outcomes.clone()).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook dispatcher: recording outcomes failed");
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
            }
        }
    }
}

/// The store's time, carried on by the monotonic clock since a claim: the dispatcher (and the
/// alerter) read no wall clock of their host (whose skew must change no decision; see
/// tests/lease_clock.rs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoreClock {
    pub(crate) at_claim: Timestamp,
    pub(crate) claimed: Instant,
}

impl StoreClock {
    pub(crate) fn now(&self) -> Timestamp {
        self.at_claim.plus(self.claimed.elapsed())
    }
}

/// One attempt: the message signed and sent, and the verdict on the answer.
async fn attempt(
    outbound: &Outbound,
    c: ClaimedDelivery,
    timeout: Duration,
    policy: &RetryPolicy,
    clock: StoreClock,
) -> DeliveryOutcome {
    let d = &c.delivery;
    let id = message::message_id(d);
    let body = message::body(d);
    // webhook-timestamp: Unix seconds, which receivers hold against their clocks.
    let stamp = clock.now().0 / 1000;
    let result = match (Url::parse(&c.url), sign::signature(&c.secret, &id, stamp, &body)) {
        (Err(e), _) => {
            DeliveryResult::Dead { status: None, error: format!("the subscription's url does not parse: {e}") }
        }
        (_, Err(e)) => DeliveryResult::Dead { status: None, error: e.to_string() },
        (Ok(url), Ok(signature)) => {
            let mut req = Request::new(Method::POST, url);
            req.plain_headers = vec![
                ("webhook-id".into(), id),
                ("webhook-timestamp".into(), stamp.to_string()),
                ("webhook-signature".into(), signature),
                ("user-agent".into(), concat!("shiftboss/", env!("CARGO_PKG_VERSION")).into()),
            ];
            // The bytes that were signed, exactly.
            let text = String::from_utf8(body).unwrap_or_default();
            req.body = Body::Text { content_type: "application/json".into(), text };
            req.timeout = Some(timeout);
            let answer = outbound.call(req).await;
            if let Err(e) = &answer {
                tracing::debug!(delivery = d.id, error = %e, "webhook delivery failed");
            }
            verdict::verdict(&answer, d.attempts, policy)
        }
    };
    DeliveryOutcome { id: d.id, token: c.token, result }
}
