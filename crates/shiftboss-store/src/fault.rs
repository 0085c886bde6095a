//! Fault injection for the chaos harness (`shiftboss-lab chaos`): a process told to die at a given
//! point kills itself there with SIGKILL, exactly as a crash at that instant would leave things.
//!
//! Built only with the cargo feature `fault-injection`, which the lab turns on and the product
//! leaves off: without it, [`reached`] is an empty inline function, the points cost nothing, and
//! this crate does not depend on rustix's process calls. The points themselves (one call each in the engine's
//! runtime and reply writer and in each store's write transaction) stay in the code either way.
//!
//! With the feature, it is inert unless `SHIFTBOSS_FAULT` is set when the process starts, as
//! `POINT@N`: the process dies the N-th time it reaches POINT (`before-call`, `after-call`,
//! `before-commit`, `after-commit`). A count rather than a probability, so that the harness
//! chooses the moment from its own seed. The points cost one relaxed atomic load when unset.

/// Where a process may be told to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// An agent is about to call its remote service.
    BeforeCall,
    /// A reply came back from the agent and has not been written to the store yet.
    AfterCall,
    /// A write transaction did all its statements; COMMIT is not sent yet (it rolls back).
    BeforeCommit,
    /// A write transaction committed; nothing after it ran (the caller never learns of it).
    AfterCommit,
}

impl FaultPoint {
    pub const ALL: [FaultPoint; 4] =
        [FaultPoint::BeforeCall, FaultPoint::AfterCall, FaultPoint::BeforeCommit, FaultPoint::AfterCommit];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultPoint::BeforeCall => "before-call",
            FaultPoint::AfterCall => "after-call",
            FaultPoint::BeforeCommit => "before-commit",
            FaultPoint::AfterCommit => "after-commit",
        }
    }

    pub fn parse(s: &str) -> Option<FaultPoint> {
        FaultPoint::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// The environment variable read once at the first point reached.
pub const FAULT_ENV: &str = "SHIFTBOSS_FAULT";

/// Whether this build can die at the points (the feature `fault-injection`): the harness refuses
/// to run without it, since its armed workers would never die where it says.
pub const ENABLED: bool = cfg!(feature = "fault-injection");

/// `POINT@N`, N >= 1; anything else leaves the process unarmed (a typo must not kill production).
pub fn parse_spec(spec: &str) -> Option<(FaultPoint, u64)> {
    let (point, at) = spec.split_once('@')?;
    let at: u64 = at.parse().ok().filter(|n| *n >= 1)?;
    Some((FaultPoint::parse(point)?, at))
}

/// Marks that the process reached `point`; dies here if it was told to.
#[cfg(feature = "fault-injection")]
pub fn reached(point: FaultPoint) {
    armed::reached(point);
}

/// Marks that the process reached `point`: nothing, in a build without `fault-injection`.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn reached(_point: FaultPoint) {}

#[cfg(feature = "fault-injection")]
mod armed {
    use super::{FAULT_ENV, FaultPoint, parse_spec};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Armed {
        point: FaultPoint,
        at: u64,
        seen: AtomicU64,
    }

    fn armed() -> Option<&'static Armed> {
        static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
        ARMED
            .get_or_init(|| {
                let spec = std::env::var(FAULT_ENV).ok()?;
                let (point, at) = parse_spec(&spec)?;
                Some(Armed { point, at, seen: AtomicU64::new(0) })
            })
            .as_ref()
    }

    pub fn reached(point: FaultPoint) {
        let Some(a) = armed() else { return };
        if a.point == point && a.seen.fetch_add(1, Ordering::SeqCst) + 1 == a.at {
            // SIGKILL to ourselves: no destructor, no flush, no rollback by us; the kernel closes
            // the sockets and files, as for a crash or `kill -9`.
            let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_typos_leave_the_process_unarmed() {
        assert_eq!(parse_spec("before-call@3"), Some((FaultPoint::BeforeCall, 3)));
        assert_eq!(parse_spec("after-commit@1"), Some((FaultPoint::AfterCommit, 1)));
        assert_eq!(parse_spec("after-commit@0"), None);
        assert_eq!(parse_spec("after-comit@2"), None);
        assert_eq!(parse_spec("before-call"), None);
        // Unset in the test environment: reaching a point does nothing.
        reached(FaultPoint::BeforeCommit);
    }
}
