//! Being told when work becomes due, so that an idle scheduler starts it at once instead of at its
//! next poll (LISTEN/NOTIFY on PostgreSQL).

use std::sync::Arc;

/// Called when work may have become due. It must return quickly (ring a bell, do not work).
pub type WakeFn = Arc<dyn Fn() + Send + Sync>;

/// Keeps a subscription alive; dropping it stops the calls.
pub struct Subscription {
    #[allow(dead_code)]
    guard: Option<Box<dyn Send + Sync>>,
    own_writes: bool,
}

impl Subscription {
    /// No notifications: the backend has no channel for them (polling covers it).
    pub fn none() -> Self {
        Subscription { guard: None, own_writes: false }
    }

    /// True when the backend has a channel: the subscriber may then poll rarely, as a safety net
    /// for lost notifications, instead of at its short interval.
    pub fn is_live(&self) -> bool {
        self.guard.is_some()
    }

    /// True when the store rings its subscribers in process as soon as a write of the same store
    /// (handle) commits: a caller that wrote through it need not ring its own bells too.
    pub fn rings_own_writes(&self) -> bool {
        self.own_writes
    }

    /// Marks a subscription that is rung at once by its store's own writes.
    pub fn ringing_own_writes(self) -> Self {
        Subscription { own_writes: true, ..self }
    }

    /// A subscription that ends when `guard` is dropped.
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Subscription { guard: Some(Box::new(guard)), own_writes: false }
    }
}
