//! The supervisor (P6, P7, P17): every interval, if it is the leader, it finds the steps whose
//! complete-by passed while still processing and has each retried after its policy's delay, or
//! sent to Error with an alert at the threshold. It knows nothing of the business (P8).
//!
//! The leader also runs the reconciler (C6) on its own interval: timed waits end, tasks past their
//! workflow's timeout fail, and stalled tasks are decided again. And the archiver, on a third
//! interval: finished tasks (retry jobs among them) move to the history tables in batches.

use crate::config::SupervisorConfig;
use crate::elector::Elector;
use crate::metrics::Metrics;
use shiftboss_core::InstanceId;
use shiftboss_core::Timestamp;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{
    Archive, ArchiveReport, ExpireLeases, ExpiryReport, Reconcile, ReconcileReport, Reconciled, Store, StoreError,
    Swept,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, sleep_until};

/// The leader lease's name.
pub const LEADER_NAME: &str = "supervisor";

pub struct Supervisor {
    store: Arc<dyn Store>,
    elector: Elector,
    config: SupervisorConfig,
    policies: Arc<RetryPolicies>,
    metrics: Arc<Metrics>,
    /// Rung when a lease may be taken or work queued (a claim in this process, the store's
    /// due-work channel): the sweep and the reconciler look again as soon as their gaps allow.
    bell: Arc<Notify>,
    /// True when the store rings `bell` for every process's queued work: the duties may then
    /// sleep up to `idle_interval` instead of their intervals.
    notified: bool,
    /// The engine's event bell, rung after a sweep or a reconcile pass that wrote events (a step
    /// to Error, a task timed out): what follows the log here (the alerter, event streams) reads
    /// them at once.
    events: Option<watch::Sender<()>>,
}

impl Supervisor {
    pub fn new(
        store: Arc<dyn Store>,
        instance: InstanceId,
        config: SupervisorConfig,
        policies: Arc<RetryPolicies>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let elector = Elector::new(store.clone(), LEADER_NAME, instance, config.leader_ttl);
        Supervisor { store, elector, config, policies, metrics, bell: Arc::default(), notified: false, events: None }
    }

    /// The event bell to ring after a pass that wrote events.
    pub fn with_events(mut self, events: watch::Sender<()>) -> Self {
        self.events = Some(events);
        self
    }

    fn ring_events(&self) {
        if let Some(e) = &self.events {
            e.send_replace(());
        }
    }

    /// The bell this supervisor listens to, and whether the store's due-work channel rings it.
    pub fn with_bell(mut self, bell: Arc<Notify>, notified: bool) -> Self {
        self.bell = bell;
        self.notified = notified;
        self
    }

    /// One sweep, in batches, if this instance is the leader. Tests call it directly.
    pub async fn run_once(&mut self) -> Result<ExpiryReport, StoreError> {
        Ok(self.sweep().await?.0)
    }

    /// One sweep, in batches: what it did in all, and what the last batch said of the next
    /// complete-by and due time (none when this instance is not the leader).
    async fn sweep(&mut self) -> Result<(ExpiryReport, Option<Swept>), StoreError> {
        let started = std::time::Instant::now();
        let out = self.sweep_batches().await;
        let term = self.elector.current().map_or(0, |t| u64::try_from(t.term).unwrap_or(0));
        self.metrics.leader_term.store(term, std::sync::atomic::Ordering::Relaxed);
        if matches!(out, Ok((_, Some(_)))) {
            Metrics::add(&self.metrics.sweeps, 1);
            Metrics::add(&self.metrics.sweep_micros, u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        }
        out
    }

    async fn sweep_batches(&mut self) -> Result<(ExpiryReport, Option<Swept>), StoreError> {
        let mut total = ExpiryReport::default();
        // A term the store refuses (it lapsed while this instance was paused, say) is dropped, and
        // the lease is asked for once more: if nobody else took it, the sweep goes on.
        let mut elections = 0;
        let Some(mut term) = self.elector.ensure().await? else { return Ok((total, None)) };
        loop {
            let p = ExpireLeases { leader: term.clone(), limit: self.config.batch, policies: self.policies.clone() };
            let swept = match self.store.sweep(p).await {
                Ok(r) => r,
                Err(StoreError::NotLeader(_)) if elections == 0 => {
                    elections += 1;
                    self.elector.forget();
                    match self.elector.ensure().await? {
                        Some(t) => {
                            term = t;
                            continue;
                        }
                        None => return Ok((total, None)),
                    }
                }
                Err(e) => {
                    if matches!(e, StoreError::NotLeader(_)) {
                        self.elector.forget();
                    }
                    return Err(e);
                }
            };
            let r = &swept.report;
            total.retried += r.retried;
            total.gave_up += r.gave_up;
            Metrics::add(&self.metrics.expired, u64::from(r.retried + r.gave_up));
            Metrics::add(&self.metrics.gave_up, u64::from(r.gave_up));
            if r.retried + r.gave_up < self.config.batch {
                if total.retried + total.gave_up > 0 {
                    tracing::info!(retried = total.retried, gave_up = total.gave_up, "supervisor sweep");
                    self.ring_events();
                }
                return Ok((total, Some(swept)));
            }
        }
    }

    /// One reconciler pass, if this instance is the leader. Tests call it directly.
    pub async fn reconcile_once(&mut self) -> Result<ReconcileReport, StoreError> {
        Ok(self.reconcile().await?.map(|r| r.report).unwrap_or_default())
    }

    /// One reconciler pass and the next timed repair it knows of; none when not the leader.
    async fn reconcile(&mut self) -> Result<Option<Reconciled>, StoreError> {
        let Some(term) = self.elector.ensure().await? else { return Ok(None) };
        let p = Reconcile { leader: term, stale_after: self.config.stale_after, limit: self.config.batch };
        let r = self.store.reconcile_pass(p).await;
        match &r {
            Err(StoreError::NotLeader(_)) => self.elector.forget(),
            Ok(Reconciled { report: r, .. }) if *r != ReconcileReport::default() => {
                self.ring_events();
                tracing::info!(
                    waits_ended = r.waits_ended,
                    timed_out = r.timed_out,
                    redecided = r.redecided,
                    "reconciler"
                );
            }
            _ => {}
        }
        r.map(Some)
    }

    /// One archiver pass, if this instance is the leader: batches until the backlog is gone (at
    /// most ten per pass, so the other duties keep their rhythm). Tests call it directly.
    pub async fn archive_once(&mut self) -> Result<ArchiveReport, StoreError> {
        let mut total = ArchiveReport::default();
        let a = &self.config.archive;
        for _ in 0..10 {
            let Some(term) = self.elector.ensure().await? else { break };
            let p = Archive { leader: term, after: a.after, keep: a.keep, limit: a.batch };
            let r = match self.store.archive(p).await {
                Ok(r) => r,
                Err(e) => {
                    if matches!(e, StoreError::NotLeader(_)) {
                        self.elector.forget();
                    }
                    return Err(e);
                }
            };
            total.tasks += r.tasks;
            total.steps += r.steps;
            total.events += r.events;
            total.purged += r.purged;
            total.deliveries += r.deliveries;
            if r.tasks < u64::from(a.batch) && r.purged < u64::from(a.batch) && r.deliveries < u64::from(a.batch) {
                break;
            }
        }
        if total != ArchiveReport::default() {
            tracing::info!(tasks = total.tasks, purged = total.purged, deliveries = total.deliveries, "archiver");
        }
        Ok(total)
    }

    pub fn is_leader(&self) -> bool {
        self.elector.current().is_some()
    }

    /// Runs the leader's duties until shutdown, then resigns the lease. Each duty sleeps until the
    /// next time it knows of (a complete-by, a due time, a wait's end, a renewal), or until a
    /// bell (a claim in this process, the store's due-work channel), never running twice within
    /// its interval, and at least once per idle interval (the safety net for lost notifications).
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let c = &self.config;
        let idle = |short: Duration| if self.notified { c.idle_interval.max(short) } else { short };
        let (now, renew) = (Instant::now(), c.leader_ttl / 3);
        let mut sweep = Duty::new(now, c.interval, idle(c.interval));
        let mut reconcile = Duty::new(now, c.reconcile_interval, idle(c.reconcile_interval));
        let mut archive = Duty::new(now, c.archive.interval, c.archive.interval);
        let (archiving, archive_every) = (c.archive.enabled, c.archive.interval);
        let bell = self.bell.clone();
        // After a failed renewal, the next try waits an interval: a renewal time in the past must
        // not spin against a store that is down.
        let mut renew_not_before = now;
        loop {
            let mut wake = sweep.next.min(reconcile.next);
            if archiving {
                wake = wake.min(archive.next);
            }
            if let Some(at) = self.elector.renewal_at() {
                wake = wake.min(at.max(renew_not_before));
            }
            tokio::select! {
                _ = sleep_until(wake) => {}
                _ = bell.notified() => {
                    // Work was queued or claimed: a new complete-by, wait or deadline may be near.
                    sweep.soon();
                    reconcile.soon();
                    continue;
                }
                _ = shutdown.changed() => break,
            }
            // The duties' store calls race the shutdown: one that hangs on a store that is down
            // must not hold the process. A call dropped mid-flight commits or not; the sweep, the
            // reconciler and the archiver are fenced by the leader's term either way.
            let duties = async {
                let now = Instant::now();
                let mut ran = false;
                if sweep.next <= now {
                    ran = true;
                    let next = match self.sweep().await {
                        Ok((_, Some(s))) => {
                            // Work due (or overdue) to be claimed: a claim, then a complete-by, follows.
                            let due = s.next_due.map(|d| d.max(s.now));
                            at_store_time(&s.now, [s.next_complete_by, due])
                        }
                        // Not the leader: try for the lease again within a third of its life.
                        Ok((_, None)) => Some(Instant::now() + renew.min(sweep.idle)),
                        Err(e) => {
                            tracing::warn!(error = %e, "supervisor sweep failed; trying again next interval");
                            Some(now)
                        }
                    };
                    sweep.ran(now, next);
                }
                if reconcile.next <= now {
                    ran = true;
                    let next = match self.reconcile().await {
                        Ok(Some(r)) => at_store_time(&r.now, [r.next_at]),
                        Ok(None) => Some(Instant::now() + renew.min(reconcile.idle)),
                        Err(e) => {
                            tracing::warn!(error = %e, "reconciler pass failed; trying again next interval");
                            Some(now)
                        }
                    };
                    reconcile.ran(now, next);
                }
                if archiving && archive.next <= now {
                    ran = true;
                    let moved = match self.archive_once().await {
                        Ok(r) => r != ArchiveReport::default(),
                        Err(e) => {
                            tracing::warn!(error = %e, "archiver pass failed; trying again next interval");
                            true
                        }
                    };
                    archive.idle = archive_wait(archive.idle, archive_every, moved);
                    archive.ran(now, None);
                }
                if !ran && let Err(e) = self.elector.ensure().await {
                    tracing::warn!(error = %e, "leader lease renewal failed; trying again next interval");
                    renew_not_before = Instant::now() + sweep.gap;
                }
            };
            tokio::select! {
                _ = duties => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
        // A resignation lets another supervisor lead at once; past the lease's life it is
        // pointless (the lease has lapsed), and the store may not answer at all.
        if tokio::time::timeout(self.config.leader_ttl, self.elector.resign()).await.is_err() {
            tracing::warn!("could not resign the leader lease in time; it will lapse");
        }
    }
}

/// The earliest of some store times, as an instant of this process's clock; a time already past
/// is now. One millisecond later, as the store's clock counts whole milliseconds.
fn at_store_time<const N: usize>(now: &Timestamp, times: [Option<Timestamp>; N]) -> Option<Instant> {
    let earliest = times.into_iter().flatten().min()?;
    Some(Instant::now() + earliest.since(*now) + Duration::from_millis(1))
}

/// The longest wait between two archiver passes that find nothing to move, in intervals.
const ARCHIVE_QUIET: u32 = 6;

/// The wait after an archiver pass that waited `last`: the interval after a pass that moved
/// something (or failed), else twice the last, up to [`ARCHIVE_QUIET`] intervals. What it moves
/// is never urgent, and each look at an idle store is a transaction.
fn archive_wait(last: Duration, every: Duration, moved: bool) -> Duration {
    if moved { every } else { (last * 2).clamp(every, every * ARCHIVE_QUIET) }
}

/// One of the supervisor's duties (sweep, reconcile, archive): when it runs next. It never runs
/// again within `gap` of its last run (so a busy store costs what a fixed tick did), and never
/// sleeps longer than `idle`.
struct Duty {
    next: Instant,
    last: Option<Instant>,
    gap: Duration,
    idle: Duration,
}

impl Duty {
    fn new(now: Instant, gap: Duration, idle: Duration) -> Self {
        Duty { next: now, last: None, gap, idle }
    }

    /// It ran at `at`; `wanted` is the next time it knows of, if any (`at` itself after a failure:
    /// it tries again after its gap).
    fn ran(&mut self, at: Instant, wanted: Option<Instant>) {
        self.last = Some(at);
        let latest = at + self.idle;
        self.next = wanted.map_or(latest, |w| w.min(latest)).max(at + self.gap);
    }

    /// Runs as soon as its gap allows.
    fn soon(&mut self) {
        let earliest = self.last.map_or_else(Instant::now, |l| l + self.gap);
        self.next = self.next.min(earliest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archiver_that_finds_nothing_looks_less_often_and_at_once_again_after_a_move() {
        let every = Duration::from_secs(10);
        let mut wait = every;
        let mut waits = Vec::new();
        for _ in 0..4 {
            wait = archive_wait(wait, every, false);
            waits.push(wait.as_secs());
        }
        assert_eq!(waits, [20, 40, 60, 60], "doubling up to six intervals");
        assert_eq!(archive_wait(wait, every, true), every, "a pass that moved something: the interval again");
    }
}
