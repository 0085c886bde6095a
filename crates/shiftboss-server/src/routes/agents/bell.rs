//! What waiting polls share in one serve process: one subscription to the store's due-work
//! channel (inotify on SQLite's WAL, LISTEN on PostgreSQL), made at the first poll and rung into
//! a counter every waiting poll watches; and the throttle of the worker registry's writes.

use shiftboss_store::{Store, Subscription, WorkerSeen, WorkersSeen};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A worker's row is written at most this often: a poller that answers in milliseconds must not
/// cost the store a write per poll.
pub const SEEN_EVERY: Duration = Duration::from_secs(5);

/// Rows unseen this long are deleted as others are written.
pub const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The most (worker, agents) entries the throttle remembers before it starts over.
const THROTTLE_MAX: usize = 10_000;

pub struct RemoteWorkers {
    /// The server's request timeout: a poll's wait ends well before it.
    pub request_time: Duration,
    rings: Arc<watch::Sender<u64>>,
    /// The store's subscription, once a poll has waited; `Some(live)` tells whether it rings.
    subscription: Mutex<Option<Subscription>>,
    /// When each worker's polls for a set of agent types were last written.
    written: Mutex<HashMap<(String, Vec<String>), Instant>>,
}

impl RemoteWorkers {
    pub fn new(request_time: Duration) -> Self {
        RemoteWorkers {
            request_time,
            rings: Arc::new(watch::channel(0).0),
            subscription: Mutex::new(None),
            written: Mutex::default(),
        }
    }

    /// A receiver that changes whenever any process queues work, and whether the store rings at
    /// all (a store without a channel leaves the poll to look again on its own).
    pub fn listen(&self, store: &Arc<dyn Store>) -> (watch::Receiver<u64>, bool) {
        let rx = self.rings.subscribe();
        let mut sub = self.subscription.lock().unwrap_or_else(|p| p.into_inner());
        let s = sub.get_or_insert_with(|| {
            let rings = self.rings.clone();
            store.subscribe_due_work(Arc::new(move || rings.send_modify(|n| *n = n.wrapping_add(1))))
        });
        (rx, s.is_live())
    }

    /// Rings every waiting poll of this process (after a submission made here).
    pub fn ring(&self) {
        self.rings.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether this worker's poll for these agent types is due to be written to the registry, and
    /// if so, takes the turn (a failed write waits for the next turn; the registry is advisory).
    pub fn seen_due(&self, worker: &str, agents: &[String]) -> Option<WorkersSeen> {
        let mut agents = agents.to_vec();
        agents.sort();
        agents.dedup();
        let key = (worker.to_owned(), agents);
        let now = Instant::now();
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if w.get(&key).is_some_and(|at| now.duration_since(*at) < SEEN_EVERY) {
            return None;
        }
        if w.len() >= THROTTLE_MAX {
            w.clear();
        }
        w.insert(key.clone(), now);
        let seen = key.1.into_iter().map(|agent| WorkerSeen { agent, worker: worker.to_owned() }).collect();
        Some(WorkersSeen { seen, forget_after: FORGET_AFTER })
    }
}
