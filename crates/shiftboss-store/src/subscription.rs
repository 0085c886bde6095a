//! Being told when work becomes due, so that an idle scheduler starts it at once instead of at its
//! next poll (LISTEN/NOTIFY on PostgreSQL).

use std::sync::Arc;

/// Called when work may have become due. It must return quickly (ring a bell, do not work).
pub type WakeFn = Arc<dyn Fn() + Send + Sync>;

/// Keeps a subscription alive; dropping it stops the calls.
pub struct Subscription(#[allow(dead_code)] Option<Box<dyn Send + Sync>>);

impl Subscription {
    /// No notifications: the backend has no channel for them (polling covers it).
    pub fn none() -> Self {
        Subscription(None)
    }

    /// True when the backend has a channel: the subscriber may then poll rarely, as a safety net
    /// for lost notifications, instead of at its short interval.
    pub fn is_live(&self) -> bool {
        self.0.is_some()
    }

    /// A subscription that ends when `guard` is dropped.
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Subscription(Some(Box::new(guard)))
    }
}
