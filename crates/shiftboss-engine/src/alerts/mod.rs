//! Operator alerts (P16, P17): the alert events of the log, and running tasks without progress,
//! told to the sinks an operator configures (the log, a webhook, a chat webhook), with repeats on
//! one subject folded.
//!
//! The alerts are already written: every alert event (a step in Error, a failed task, a failed
//! compensation, a dead delivery, ...) is committed in the transaction of the change that caused
//! it. The alerter is a reader of the log: the process that leads the supervisor (no lease of its
//! own, so no more calls on an idle store) follows it with a cursor kept in the store, so a
//! restarted or new leader goes on where the last one stopped. Two processes may both believe
//! they lead for a moment; the worst that does is an alert sent twice. The cursor is only moved past an event once every sink has done with its
//! alert (sent, given up, or dropped because the sink's queue was full) and no folded summary
//! still holds it: a crash at any point sends an alert again rather than never. The migration that
//! made the cursor set it at the end of the log as it stood then: history is the console's, not a
//! pager's; a new store's starts at 0.

pub mod alert;
pub mod fold;
pub mod sink;
pub mod stuck;

pub use alert::{Alert, AlertTask};
pub use sink::{AlertCounters, SinkConfig, SinkKind};

use crate::dispatcher::StoreClock;
use crate::outbound::Outbound;
use fold::Folder;
use shiftboss_store::event_kind::ALERT_KINDS;
use shiftboss_store::{EventCursor, EventFilter, ReadEvents, Store};
use sink::Sink;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use stuck::StuckScan;
use tokio::sync::watch;
use tokio::time::Instant;

/// The store cursor the alerter keeps its place in the log with.
pub const CURSOR: &str = "alerter";

/// How often a process that does not lead looks again (at its own supervisor's term).
const NOT_LEADING: Duration = Duration::from_millis(250);

/// The longest the saved cursor lags behind a reader that found no alerts.
const CURSOR_EVERY: Duration = Duration::from_secs(60);

/// The alerter's settings (`[alerts]`).
#[derive(Debug, Clone, PartialEq)]
pub struct AlertConfig {
    /// Where alerts go. The default is the log alone.
    pub sinks: Vec<SinkConfig>,
    /// Repeats on one subject within this are folded into one summary (0: none are).
    pub fold: Duration,
    /// A running task with no progress for this long is reported (0: never).
    pub stuck_after: Duration,
    /// How often running tasks are looked at for progress.
    pub stuck_scan: Duration,
    /// How often the log is read after a read that found alerts; each read that finds none
    /// doubles the wait, up to `idle_poll`.
    pub poll: Duration,
    /// The longest wait between two reads of a quiet log.
    pub idle_poll: Duration,
    /// Alerts each sink holds before it drops new ones.
    pub queue: usize,
    /// The longest one call to a webhook takes.
    pub call_timeout: Duration,
}

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            sinks: vec![SinkConfig::log()],
            fold: Duration::from_secs(600),
            stuck_after: Duration::from_secs(3600),
            stuck_scan: Duration::from_secs(60),
            poll: Duration::from_secs(1),
            // Its own process and other processes' queued work ring it sooner; each read of a
            // quiet log is a transaction.
            idle_poll: Duration::from_secs(30),
            queue: 1000,
            call_timeout: Duration::from_secs(10),
        }
    }
}

impl AlertConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.poll.is_zero() || self.stuck_scan.is_zero() || self.call_timeout.is_zero() || self.queue == 0 {
            return Err("alerts: poll, stuck scan, call timeout and queue must be more than 0".into());
        }
        if self.idle_poll < self.poll {
            return Err("alerts: the idle poll must be at least the poll".into());
        }
        let mut names = std::collections::HashSet::new();
        for s in &self.sinks {
            s.validate()?;
            if !names.insert(&s.name) {
                return Err(format!("alerts: two sinks are named {}", s.name));
            }
        }
        Ok(())
    }
}

pub struct Alerter {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) outbound: Outbound,
    pub(crate) config: AlertConfig,
    pub(crate) counters: Arc<AlertCounters>,
    /// The supervisor's leader term in this process (0: it does not lead).
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// The engine's event bell (this process's writes, and the store's due-work channel): a
    /// quiet alerter reads again soon after it rings, not at its idle poll.
    pub(crate) bell: Option<watch::Receiver<()>>,
}

/// After the event bell rings, the alerter reads at most this often: under load the bell rings
/// for every write, and one read covers them all.
const BELL_GAP: Duration = Duration::from_millis(100);

/// What a leader holds: where it reads, what it folds, and where the store's cursor stands.
struct Reading {
    cursor: EventCursor,
    folder: Folder,
    stuck: StuckScan,
    next_stuck: Instant,
    saved: i64,
    saved_at: Instant,
    /// The highest id of an alert event read.
    last_alert: i64,
    /// The wait after a read that found nothing: doubles up to the idle poll.
    quiet: Duration,
}

impl Alerter {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let Some(clock) = self.clock(&mut shutdown).await else { return };
        let c = &self.config;
        let mut sinks: Vec<Sink> = c
            .sinks
            .iter()
            .map(|s| {
                Sink::start(s.clone(), self.outbound.clone(), c.queue, c.call_timeout, clock, self.counters.clone())
            })
            .collect();
        let mut reading: Option<Reading> = None;
        let mut backoff = Duration::from_millis(100);
        let mut failures = crate::throttle::Throttle::new(crate::throttle::EVERY);
        let mut bell = self.bell.clone();
        loop {
            if *shutdown.borrow() {
                break;
            }
            let wait = match self.turn(&mut reading, &mut sinks, clock).await {
                Ok(wait) => {
                    backoff = Duration::from_millis(100);
                    if let Some(n) = failures.succeeded() {
                        tracing::info!(failures = n, "alerter: the store answers again");
                    }
                    wait
                }
                Err(e) => {
                    if let Some(held) = failures.failed(Instant::now()) {
                        tracing::warn!(error = %e, not_logged = held, "alerter: reading the store failed; trying again (logged once per 10 s while it lasts)");
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    backoff
                }
            };
            let turned = Instant::now();
            let rung = async {
                match bell.as_mut() {
                    Some(b) => b.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                ok = rung => {
                    if !ok {
                        // The engine is gone: the poll alone, from now on.
                        bell = None;
                    }
                    // Something was written: read within the gap, not at the idle poll.
                    let soon = (turned + BELL_GAP).min(turned + wait);
                    tokio::select! {
                        _ = tokio::time::sleep_until(soon) => {}
                        _ = shutdown.changed() => {}
                    }
                }
                _ = shutdown.changed() => {}
            }
        }
        // What is folded goes out now; the sinks get a call timeout to drain, and the cursor is
        // moved past what they sent.
        if let Some(r) = reading.as_mut() {
            for a in r.folder.flush() {
                self.raise(&mut sinks, a);
            }
        }
        let bound = c.call_timeout + Duration::from_secs(1);
        let stops: Vec<_> = sinks.into_iter().map(|s| s.stop(bound)).collect();
        let drained = futures_util::future::join_all(stops).await.into_iter().all(|d| d);
        if let Some(r) = reading
            && drained
            && self.leads()
            && r.cursor.after > r.saved
        {
            let _ = self.store.advance_cursor(CURSOR, r.cursor.after).await;
        }
    }

    /// The store's time at start, carried on by the monotonic clock (webhook timestamps).
    async fn clock(&self, shutdown: &mut watch::Receiver<bool>) -> Option<StoreClock> {
        let mut pause = Duration::from_millis(100);
        loop {
            let asked = Instant::now();
            tokio::select! {
                r = self.store.now() => match r {
                    Ok(now) => return Some(StoreClock { at_claim: now, claimed: asked }),
                    Err(e) => tracing::warn!(error = %e, "alerter: reading the store's time failed"),
                },
                _ = shutdown.changed() => return None,
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.changed() => return None,
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// One turn: as leader, read what the log has, raise what it says and what is due, look for
    /// stuck tasks when it is time, and move the store's cursor. The wait until the next turn.
    async fn turn(
        &self,
        reading: &mut Option<Reading>,
        sinks: &mut [Sink],
        clock: StoreClock,
    ) -> Result<Duration, shiftboss_store::StoreError> {
        let c = &self.config;
        if !self.leads() {
            // Another process alerts; what this one folded it will read again from the cursor.
            // The look costs no store call: look often, so a new leader starts at once.
            *reading = None;
            return Ok(NOT_LEADING.min(c.poll));
        }
        let r = match reading {
            Some(r) => r,
            None => {
                let saved = self.store.read_cursor(CURSOR).await?;
                // No cursor (removed by hand): the whole log, rather than a stretch missed.
                let cursor = EventCursor::after(saved.unwrap_or(0));
                tracing::info!(after = cursor.after, "alerter: leading; reading the log after the saved cursor");
                reading.insert(Reading {
                    cursor,
                    folder: Folder::new(c.fold),
                    stuck: StuckScan::new(c.stuck_after),
                    next_stuck: Instant::now() + c.stuck_scan.min(c.stuck_after.max(Duration::from_millis(1))),
                    saved: saved.unwrap_or(0),
                    saved_at: Instant::now(),
                    last_alert: 0,
                    quiet: c.poll,
                })
            }
        };
        let filter =
            EventFilter { kinds: ALERT_KINDS.iter().map(|k| k.to_string()).collect(), ..EventFilter::default() };
        let read = self.store.read_events(ReadEvents { cursor: r.cursor, filter, limit: 500 }).await?;
        let now = Instant::now();
        for e in &read.events {
            r.last_alert = r.last_alert.max(e.event.id);
            self.offer(sinks, &mut r.folder, Alert::from_event(e), now);
        }
        r.cursor = read.cursor;
        for a in r.folder.due(now) {
            self.raise(sinks, a);
        }
        if !c.stuck_after.is_zero() && now >= r.next_stuck {
            r.next_stuck = now + c.stuck_scan;
            for a in r.stuck.look(self.store.as_ref(), clock.now()).await? {
                self.offer(sinks, &mut r.folder, a, now);
            }
        }
        // The cursor stays before anything a sink or the folder still holds. It is written once it
        // passes an alert (so a restart does not send that again), else at most once a minute:
        // rereading events that are not alerts costs a read, writing after every read a write.
        let held = sinks.iter().filter_map(Sink::oldest_pending).chain(r.folder.oldest_held()).min();
        let safe = held.map_or(r.cursor.after, |h| (h - 1).min(r.cursor.after));
        let passed_alert = r.last_alert > r.saved && safe >= r.last_alert;
        if safe > r.saved && (passed_alert || r.saved_at.elapsed() >= CURSOR_EVERY) {
            self.store.advance_cursor(CURSOR, safe).await?;
            r.saved = safe;
            r.saved_at = Instant::now();
        }
        if read.again {
            // More to read at once, or events not settled yet (nothing announces when they are).
            return Ok(if read.events.is_empty() { Duration::from_millis(10) } else { Duration::ZERO });
        }
        r.quiet = if read.events.is_empty() { (r.quiet * 2).min(c.idle_poll) } else { c.poll };
        let mut wait = r.quiet;
        if let Some(due) = r.folder.next_due() {
            wait = wait.min(due.saturating_duration_since(now));
        }
        if !c.stuck_after.is_zero() {
            wait = wait.min(r.next_stuck.saturating_duration_since(now));
        }
        Ok(wait)
    }

    /// Whether this process leads the supervisor (as its last sweep found).
    fn leads(&self) -> bool {
        self.metrics.leader_term.load(Ordering::Relaxed) > 0
    }

    /// Raises an alert unless it folds into its subject's window, and any summary now due.
    fn offer(&self, sinks: &mut [Sink], folder: &mut Folder, alert: Alert, now: Instant) {
        let (due, held) = folder.offer(alert, now);
        if held {
            self.counters.folded.fetch_add(1, Ordering::Relaxed);
        }
        for a in due {
            self.raise(sinks, a);
        }
    }

    fn raise(&self, sinks: &mut [Sink], alert: Alert) {
        self.counters.raised.fetch_add(1, Ordering::Relaxed);
        // One line per alert raised (repeats fold, so they are few): with webhook sinks only, the
        // log still says that the alerter read it, apart from whether a sink delivered it.
        tracing::info!(kind = %alert.kind, subject = %alert.subject, count = alert.count, sinks = sinks.len(), "alerter: raised");
        for s in sinks.iter_mut() {
            s.offer(alert.clone());
        }
    }
}
