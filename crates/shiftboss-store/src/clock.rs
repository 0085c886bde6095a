//! The clock a store uses for leases and due times.
//!
//! In production it is the database's clock, so that machines whose clocks disagree still agree on
//! when a lease lapsed. Tests put in a [`ManualClock`] and move time by hand instead of sleeping.

use shiftboss_core::Timestamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The database's own clock (for an embedded SQLite file, the host's clock).
    #[default]
    Database,
    /// Time that moves only when a test moves it.
    Manual(Arc<ManualClock>),
}

#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(ManualClock(AtomicI64::new(start.0)))
    }

    pub fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }

    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(shiftboss_core::time::duration_ms(d), Ordering::SeqCst);
    }

    pub fn set(&self, t: Timestamp) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}
