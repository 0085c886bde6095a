//! Where a claim of due steps starts reading: past the dead entries that claims leave at the front
//! of the due index.
//!
//! A claimed step's entry in `steps_due` stays in the index, dead, until a vacuum removes it, and
//! the claim reads that index from its front: after a drain of 20,000 steps, a claim that took one
//! new step read 100 index pages of nothing (0.56 ms of PostgreSQL's time, `EXPLAIN (ANALYZE,
//! BUFFERS)`), on the path of every pickup. A vacuum clears them, but autovacuum comes by a busy
//! table only now and then (and not at all where it is off).
//!
//! So once a claim of one shape (agent types, buckets, domains) came up short, having taken what
//! was due for it then, the next claim of that shape reads only the steps due since, less a
//! margin for transactions that commit later than their clock (a step's due time is its writer's
//! clock at BEGIN). It reads them through `steps_next_due` (the due time leads) and orders them
//! by priority itself, so the highest priority still goes first; past 4,096 due since the floor
//! (a burst) it reads from the front instead (`claim::pick_from_floor`). A claim that took its
//! limit leaves work behind it, and the next starts from the front.
//!
//! What such a claim passes over (a commit later than the margin, a step another claim locked and
//! let go, a step of an unserved domain whose fallback time came): a claim that finds nothing past
//! its floor reads from the front at once (in the same statement: `claim::pick_from_floor`), and a
//! claim of each shape starts from the front at least every [`FROM_FRONT_EVERY`], so those wait
//! about that long at most, as the dispatcher's deliveries do (`shiftboss_engine::dispatcher`).

use shiftboss_core::Timestamp;
use shiftboss_store::ClaimDueSteps;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A claim from a floor reads the steps due this long before the last short claim's time.
pub const FLOOR_MARGIN_MS: i64 = 1_000;

/// A claim of each shape starts from the front at least this often.
pub const FROM_FRONT_EVERY: Duration = Duration::from_secs(1);

/// The most shapes remembered before the map starts over (a shape is a set of agent types a
/// claimer names; a store sees a handful).
const MAX_SHAPES: usize = 1_024;

/// What the claims of one shape found.
#[derive(Debug, Clone, Copy)]
struct Floor {
    /// The due time the next claim may start from: the last short claim's time less the margin;
    /// `None` when the last claim took its limit.
    from: Option<i64>,
    /// When a claim of this shape must next start from the front.
    front_at: Instant,
}

/// A claim's shape: its agent types and domains (each sorted) and its buckets. Taken once per
/// claim, for its start and its note.
pub type Shape = (Vec<String>, Option<Vec<u16>>, Vec<String>);

pub fn shape(p: &ClaimDueSteps) -> Shape {
    let mut agents = p.agents.clone();
    agents.sort_unstable();
    let mut domains = p.domains.clone();
    domains.sort_unstable();
    (agents, p.buckets.clone(), domains)
}

/// The floors of this store's claims, per shape (in this process: each process finds its own).
#[derive(Debug, Default)]
pub struct ClaimFloors {
    floors: Mutex<HashMap<Shape, Floor>>,
}

impl ClaimFloors {
    /// Where a claim of this shape starts: `Some(due time)`, or `None` for the front.
    pub fn start(&self, shape: &Shape) -> Option<Timestamp> {
        let floors = self.floors.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let f = floors.get(shape)?;
        if Instant::now() >= f.front_at {
            return None;
        }
        f.from.map(Timestamp)
    }

    /// Notes what a claim of this shape found: whether it read from the front, whether it took its
    /// limit, and the store's time it ran at.
    pub fn claimed(&self, shape: Shape, from_front: bool, full: bool, now: Timestamp) {
        let mut floors = self.floors.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if floors.len() >= MAX_SHAPES {
            floors.clear();
        }
        let from = (!full).then(|| now.0.saturating_sub(FLOOR_MARGIN_MS));
        let fresh = Instant::now() + FROM_FRONT_EVERY;
        let f = floors.entry(shape).or_insert(Floor { from, front_at: fresh });
        f.from = from;
        if from_front {
            f.front_at = fresh;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shiftboss_core::InstanceId;

    fn claim(agents: &[&str]) -> Shape {
        shape(&ClaimDueSteps {
            instance: InstanceId::new("i").unwrap(),
            limit: 10,
            agents: agents.iter().map(|a| (*a).to_owned()).collect(),
            buckets: None,
            domains: Vec::new(),
            limits: Vec::new(),
        })
    }

    #[test]
    fn a_short_claim_sets_the_floor_and_a_full_one_clears_it() {
        let floors = ClaimFloors::default();
        let p = claim(&["a", "b"]);
        assert_eq!(floors.start(&p), None, "nothing known: from the front");
        floors.claimed(p.clone(), true, false, Timestamp(10_000));
        assert_eq!(floors.start(&p), Some(Timestamp(10_000 - FLOOR_MARGIN_MS)));
        // The same agents named in another order are the same shape; other agents are not.
        assert_eq!(floors.start(&claim(&["b", "a"])), Some(Timestamp(10_000 - FLOOR_MARGIN_MS)));
        assert_eq!(floors.start(&claim(&["a"])), None);
        floors.claimed(p.clone(), false, true, Timestamp(11_000));
        assert_eq!(floors.start(&p), None, "a full claim left work behind it");
    }

    #[test]
    fn the_front_comes_round_again() {
        let floors = ClaimFloors::default();
        let p = claim(&["a"]);
        floors.claimed(p.clone(), true, false, Timestamp(10_000));
        floors.floors.lock().unwrap().values_mut().for_each(|f| f.front_at = Instant::now());
        assert_eq!(floors.start(&p), None);
        // A claim from the floor does not put the front off.
        floors.claimed(p.clone(), false, false, Timestamp(12_000));
        assert_eq!(floors.start(&p), None);
        floors.claimed(p.clone(), true, false, Timestamp(12_000));
        assert_eq!(floors.start(&p), Some(Timestamp(12_000 - FLOOR_MARGIN_MS)));
    }
}
