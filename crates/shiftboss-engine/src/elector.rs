//! Keeping a leader lease (P10) for leader-only services such as the supervisor.
//!
//! The lease lives in the store and lapses by the store's clock. This side stops trusting its
//! lease a safety margin earlier by its own monotonic clock, measured from before the call that
//! took the lease, so a leader that cannot renew stops acting before another can be elected.
//! The store fences every leader-only write by term besides.

use shiftboss_core::InstanceId;
use shiftboss_store::{ElectLeader, LeaderTerm, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub struct Elector {
    store: Arc<dyn Store>,
    name: String,
    holder: InstanceId,
    ttl: Duration,
    /// The term held, and until when this side trusts it.
    held: Option<(LeaderTerm, Instant)>,
    /// When the lease was last taken or renewed.
    renewed_at: Option<Instant>,
}

impl Elector {
    pub fn new(store: Arc<dyn Store>, name: impl Into<String>, holder: InstanceId, ttl: Duration) -> Self {
        Elector { store, name: name.into(), holder, ttl, held: None, renewed_at: None }
    }

    /// The term this instance holds now, renewing it when a third of its life has passed, or
    /// trying to take it when nobody holds it.
    pub async fn ensure(&mut self) -> Result<Option<LeaderTerm>, StoreError> {
        let due = self.renewed_at.is_none_or(|t| t.elapsed() >= self.ttl / 3) || self.current().is_none();
        if due {
            let before = Instant::now();
            let got = self
                .store
                .elect_leader(ElectLeader { name: self.name.clone(), holder: self.holder.clone(), ttl: self.ttl })
                .await;
            match got {
                Ok(Some(term)) => {
                    if self.held.as_ref().is_none_or(|(h, _)| h.term != term.term) {
                        tracing::info!(role = %self.name, term = term.term, "became leader");
                    }
                    // Trust the lease for 80% of its life.
                    self.held = Some((term, before + self.ttl.mul_f64(0.8)));
                    self.renewed_at = Some(before);
                }
                Ok(None) => self.forget(),
                Err(e) => {
                    // Keep a term that is still trusted; the store refuses it anyway once it lapses.
                    if self.current().is_none() {
                        self.forget();
                    }
                    return Err(e);
                }
            }
        }
        Ok(self.current().cloned())
    }

    /// When a held lease is next renewed (a third of its life after the last renewal); none when
    /// not held. A leader with nothing else to do wakes then, so an idle leader keeps its term.
    pub fn renewal_at(&self) -> Option<Instant> {
        self.current()?;
        self.renewed_at.map(|t| t + self.ttl / 3)
    }

    /// The term, while this side still trusts it.
    pub fn current(&self) -> Option<&LeaderTerm> {
        self.held.as_ref().filter(|(_, until)| Instant::now() < *until).map(|(t, _)| t)
    }

    /// Drops the term (after the store refused it).
    pub fn forget(&mut self) {
        if let Some((t, _)) = self.held.take() {
            tracing::info!(role = %self.name, term = t.term, "no longer leader");
        }
        self.renewed_at = None;
    }

    /// Gives the lease up so another instance can take it at once.
    pub async fn resign(&mut self) {
        if let Some((term, _)) = self.held.take()
            && let Err(e) = self.store.resign_leader(&term).await
        {
            tracing::warn!(role = %self.name, error = %e, "could not resign the leader lease; it will lapse");
        }
    }
}
