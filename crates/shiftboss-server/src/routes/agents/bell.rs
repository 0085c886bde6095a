//! What waiting polls share in one serve process: one subscription to the store's due-work
//! channel (inotify on SQLite's WAL, LISTEN on PostgreSQL), made at the first poll and rung into
//! a counter every waiting poll watches; the turns in which rung polls claim; and the throttle of
//! the worker registry's writes.
//!
//! Turns: a ring wakes every waiting poll, and each would claim, though one claim takes all that
//! is due when it asks for more than there is. So rung polls of one set of agent types and
//! domains claim one at a time (a poll's first claim takes no turn: under load, polls come back
//! to work that is there and claim side by side; taking turns then cost a fifth of the remote
//! drain), and a claim that took fewer steps than it asked for leaves a note: the ring it had
//! seen, and the next due time it reported. A poll that then finds that note covering the rings
//! it has seen, before that due time, claims nothing and waits again: its claim would have found
//! nothing (everything due behind those rings was visible to the claim that took less than it
//! could). Measured: with four workers waiting, each submission cost seven claims that found
//! nothing, on the same cores as the claim that took the step.

use shiftboss_store::{Store, Subscription, WorkerSeen, WorkersSeen};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The polls of one set of agent types and domains (each sorted): they claim in turn.
type TurnKey = (Vec<String>, Vec<String>);

/// What the last claim of a turn that took fewer steps than it asked for had seen.
#[derive(Debug, Default)]
pub struct Drained {
    /// The ring counter it read before claiming.
    ring: Option<u64>,
    /// The next due time it reported (none: nothing pending later).
    until: Option<tokio::time::Instant>,
}

impl Drained {
    /// The wait of a poll that has seen ring `seen` at `now`, when a claim would find nothing:
    /// until the noted due time (`Some(None)`: until a ring). `None`: it must claim.
    pub fn covers(&self, seen: u64, now: tokio::time::Instant) -> Option<Option<tokio::time::Instant>> {
        let ring = self.ring?;
        (seen <= ring && self.until.is_none_or(|t| now < t)).then_some(self.until)
    }

    /// Notes a claim that took fewer steps than it asked for.
    pub fn note(&mut self, seen: u64, until: Option<tokio::time::Instant>) {
        self.ring = Some(self.ring.map_or(seen, |r| r.max(seen)));
        self.until = until;
    }
}

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
    /// The turns of waiting polls (see the module's text).
    turns: Mutex<HashMap<TurnKey, Arc<tokio::sync::Mutex<Drained>>>>,
}

impl RemoteWorkers {
    pub fn new(request_time: Duration) -> Self {
        RemoteWorkers {
            request_time,
            rings: Arc::new(watch::channel(0).0),
            subscription: Mutex::new(None),
            written: Mutex::default(),
            turns: Mutex::default(),
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

    /// Rings every waiting poll of this process (after a submission made here), unless the
    /// store rings them itself at its commit (PostgreSQL): a second ring would only send every
    /// waiting poll to claim again, for nothing.
    pub fn ring(&self) {
        let sub = self.subscription.lock().unwrap_or_else(|p| p.into_inner());
        if sub.as_ref().is_some_and(Subscription::rings_own_writes) {
            return;
        }
        drop(sub);
        self.rings.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The turn of the polls of these agent types and domains.
    pub fn turn(&self, agents: &[String], domains: &[String]) -> Arc<tokio::sync::Mutex<Drained>> {
        let key = (sorted(agents), sorted(domains));
        let mut t = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        // Polls holding a forgotten turn keep it: they only claim alongside the new one's.
        if t.len() >= THROTTLE_MAX && !t.contains_key(&key) {
            t.clear();
        }
        t.entry(key).or_default().clone()
    }

    /// Whether this worker's poll for these agent types is due to be written to the registry, and
    /// if so, takes the turn (a failed write waits for the next turn; the registry is advisory).
    pub fn seen_due(&self, worker: &str, agents: &[String]) -> Option<WorkersSeen> {
        let key = (worker.to_owned(), sorted(agents));
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

/// Names in order, once each: the same set however a poll lists it.
fn sorted(names: &[String]) -> Vec<String> {
    let mut v = names.to_vec();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::Drained;
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn a_drained_turn_covers_the_rings_it_saw_until_the_next_due_time() {
        let now = Instant::now();
        let mut d = Drained::default();
        assert_eq!(d.covers(0, now), None, "no claim has drained the turn yet: claim");

        d.note(5, None);
        assert_eq!(d.covers(5, now), Some(None), "ring 5 was seen by a claim that took less than it could");
        assert_eq!(d.covers(3, now), Some(None), "an older ring too");
        assert_eq!(d.covers(6, now), None, "a newer ring may have queued work: claim");

        let due = now + Duration::from_millis(100);
        d.note(4, Some(due));
        assert_eq!(d.covers(5, now), Some(Some(due)), "the highest ring noted stays; wait until the due time");
        assert_eq!(d.covers(5, due), None, "work due by then: claim");
    }
}
