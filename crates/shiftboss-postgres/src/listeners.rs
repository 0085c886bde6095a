//! One listening connection per channel and store, shared by every subscription to it.
//!
//! A process subscribes to the due-work channel more than once (its scheduler and supervisor, its
//! alerter's event bell, the API's waiting polls). Each listener holds a connection, and a quiet
//! one asks the server for an answer every `store_timeout` (see `listen`): in an idle `serve`,
//! that was three connections and three transactions every 10 s where one does. The listening
//! task ends when the last subscription to its channel is dropped.

use shiftboss_store::{Subscription, WakeFn};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// The shared listeners of one store, by channel.
#[derive(Default)]
pub struct Listeners {
    by_channel: Mutex<HashMap<String, Weak<Shared>>>,
}

/// One channel's listener and the wakes it rings.
struct Shared {
    wakes: Arc<Wakes>,
    /// The listening task; dropped (and so stopped) with the last member.
    _listener: Subscription,
}

#[derive(Default)]
struct Wakes {
    next: Mutex<(u64, Vec<(u64, WakeFn)>)>,
}

impl Wakes {
    fn add(&self, wake: WakeFn) -> u64 {
        let mut g = self.next.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        let id = g.0;
        g.1.push((id, wake));
        id
    }

    fn remove(&self, id: u64) {
        self.next.lock().unwrap_or_else(|e| e.into_inner()).1.retain(|(i, _)| *i != id);
    }

    fn ring(&self) {
        // Rung outside the lock: a wake may subscribe or drop a subscription itself.
        let wakes: Vec<WakeFn> =
            self.next.lock().unwrap_or_else(|e| e.into_inner()).1.iter().map(|(_, w)| w.clone()).collect();
        for wake in wakes {
            wake();
        }
    }
}

/// A subscription's share of its channel's listener.
struct Member {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.shared.wakes.remove(self.id);
    }
}

impl Listeners {
    /// `wake` rung by `channel`'s listener, started by `start` (given the listener's own wake)
    /// unless one runs already. `own_writes`: whether the store's own writes ring the channel's
    /// subscribers in process (the listener `start` makes says so too).
    pub fn subscribe(
        &self,
        channel: String,
        own_writes: bool,
        wake: WakeFn,
        start: impl FnOnce(WakeFn) -> Subscription,
    ) -> Subscription {
        let mut by_channel = self.by_channel.lock().unwrap_or_else(|e| e.into_inner());
        let shared = match by_channel.get(&channel).and_then(Weak::upgrade) {
            Some(shared) => shared,
            None => {
                let wakes = Arc::new(Wakes::default());
                let ring = wakes.clone();
                let listener = start(Arc::new(move || ring.ring()));
                let shared = Arc::new(Shared { wakes, _listener: listener });
                by_channel.retain(|_, w| w.strong_count() > 0);
                by_channel.insert(channel, Arc::downgrade(&shared));
                shared
            }
        };
        drop(by_channel);
        let id = shared.wakes.add(wake.clone());
        // As a listener of its own would on starting: what became due before is found by a look.
        wake();
        let s = Subscription::new(Member { shared, id });
        if own_writes { s.ringing_own_writes() } else { s }
    }
}
