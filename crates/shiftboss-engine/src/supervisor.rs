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
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{
    Archive, ArchiveReport, ExpireLeases, ExpiryReport, Reconcile, ReconcileReport, Store, StoreError,
};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::{MissedTickBehavior, interval};

/// The leader lease's name.
pub const LEADER_NAME: &str = "supervisor";

pub struct Supervisor {
    store: Arc<dyn Store>,
    elector: Elector,
    config: SupervisorConfig,
    policies: Arc<RetryPolicies>,
    metrics: Arc<Metrics>,
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
        Supervisor { store, elector, config, policies, metrics }
    }

    /// One sweep, in batches, if this instance is the leader. Tests call it directly.
    pub async fn run_once(&mut self) -> Result<ExpiryReport, StoreError> {
        let mut total = ExpiryReport::default();
        // A term the store refuses (it lapsed while this instance was paused, say) is dropped, and
        // the lease is asked for once more: if nobody else took it, the sweep goes on.
        let mut elections = 0;
        let Some(mut term) = self.elector.ensure().await? else { return Ok(total) };
        loop {
            let p = ExpireLeases { leader: term.clone(), limit: self.config.batch, policies: self.policies.clone() };
            let r = match self.store.expire_leases(p).await {
                Ok(r) => r,
                Err(StoreError::NotLeader(_)) if elections == 0 => {
                    elections += 1;
                    self.elector.forget();
                    match self.elector.ensure().await? {
                        Some(t) => {
                            term = t;
                            continue;
                        }
                        None => return Ok(total),
                    }
                }
                Err(e) => {
                    if matches!(e, StoreError::NotLeader(_)) {
                        self.elector.forget();
                    }
                    return Err(e);
                }
            };
            total.retried += r.retried;
            total.gave_up += r.gave_up;
            Metrics::add(&self.metrics.expired, u64::from(r.retried + r.gave_up));
            Metrics::add(&self.metrics.gave_up, u64::from(r.gave_up));
            if r.retried + r.gave_up < self.config.batch {
                break;
            }
        }
        if total.retried + total.gave_up > 0 {
            tracing::info!(retried = total.retried, gave_up = total.gave_up, "supervisor sweep");
        }
        Ok(total)
    }

    /// One reconciler pass, if this instance is the leader. Tests call it directly.
    pub async fn reconcile_once(&mut self) -> Result<ReconcileReport, StoreError> {
        let Some(term) = self.elector.ensure().await? else { return Ok(ReconcileReport::default()) };
        let p = Reconcile { leader: term, stale_after: self.config.stale_after, limit: self.config.batch };
        let r = self.store.reconcile(p).await;
        match &r {
            Err(StoreError::NotLeader(_)) => self.elector.forget(),
            Ok(r) if *r != ReconcileReport::default() => {
                tracing::info!(
                    waits_ended = r.waits_ended,
                    timed_out = r.timed_out,
                    redecided = r.redecided,
                    "reconciler"
                );
            }
            _ => {}
        }
        r
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
            if r.tasks < u64::from(a.batch) && r.purged < u64::from(a.batch) {
                break;
            }
        }
        if total != ArchiveReport::default() {
            tracing::info!(tasks = total.tasks, purged = total.purged, "archiver");
        }
        Ok(total)
    }

    pub fn is_leader(&self) -> bool {
        self.elector.current().is_some()
    }

    /// Sweeps every interval until shutdown, then resigns the lease.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut tick = interval(self.config.interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut reconcile = interval(self.config.reconcile_interval);
        reconcile.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut archive = interval(self.config.archive.interval);
        archive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Err(e) = self.run_once().await {
                        tracing::warn!(error = %e, "supervisor sweep failed; trying again next interval");
                    }
                }
                _ = reconcile.tick() => {
                    if let Err(e) = self.reconcile_once().await {
                        tracing::warn!(error = %e, "reconciler pass failed; trying again next interval");
                    }
                }
                _ = archive.tick(), if self.config.archive.enabled => {
                    if let Err(e) = self.archive_once().await {
                        tracing::warn!(error = %e, "archiver pass failed; trying again next interval");
                    }
                }
                _ = shutdown.changed() => break,
            }
        }
        self.elector.resign().await;
    }
}
