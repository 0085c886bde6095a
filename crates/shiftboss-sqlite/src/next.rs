//! When the sleeping roles should look next (idle load, issue 6). Each read runs inside the claim,
//! sweep or reconciler transaction it belongs to. `steps_next_due` makes the due time's `min` one
//! index entry; the next complete-by reads `steps_processing`, the processing steps only.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::types::Value;
use rusqlite::{Params, params};
use shiftboss_core::Timestamp;
use shiftboss_store::{ClaimDueSteps, StoreError};
use std::rc::Rc;

/// A paused task's pending steps are due at this time: they wait for a resume, which notifies.
const HELD: i64 = i64::MAX;

/// The earliest time after now at which a pending step becomes claimable by this claimer: its due
/// time, or for a step routed to a domain the claimer does not serve, its fallback time.
pub fn next_claimable(t: &Tx<'_>, p: &ClaimDueSteps) -> Result<Option<Timestamp>, StoreError> {
    let agents: Rc<Vec<Value>> = Rc::new(p.agents.iter().map(|a| Value::from(a.clone())).collect());
    let filtered = p.buckets.is_some();
    let buckets: Rc<Vec<Value>> = Rc::new(p.buckets.iter().flatten().map(|b| Value::from(i64::from(*b))).collect());
    let domains: Rc<Vec<Value>> = Rc::new(p.domains.iter().map(|d| Value::from(d.clone())).collect());
    let due = min(
        t,
        "SELECT min(due_at) FROM steps
          WHERE state = 'pending' AND due_at > ?1 AND due_at < ?2 AND agent IN rarray(?3)
            AND (?4 = 0 OR bucket IN rarray(?5))",
        params![t.now.0, HELD, agents.clone(), filtered, buckets.clone()],
    )?;
    let fallback = min(
        t,
        "SELECT min(fallback_at) FROM steps
          WHERE state = 'pending' AND due_at <= ?1 AND fallback_at > ?1 AND agent IN rarray(?2)
            AND (?3 = 0 OR bucket IN rarray(?4)) AND domain IS NOT NULL AND domain NOT IN rarray(?5)",
        params![t.now.0, agents, filtered, buckets, domains],
    )?;
    Ok(earliest(due, fallback))
}

/// After a sweep: the earliest complete-by or claim timeout still ahead (an `alert_only` step past
/// its deadline has none), and the earliest due time of a pending step (a claim, then a complete-by, may follow).
pub fn after_sweep(t: &Tx<'_>) -> Result<(Option<Timestamp>, Option<Timestamp>), StoreError> {
    // A claim timeout is a deadline the sweep keeps, like a complete-by.
    let complete_by = earliest(min(t, NEXT_COMPLETE_BY, [HELD])?, min(t, NEXT_CLAIM_BY, [HELD])?);
    let due = min(t, "SELECT min(due_at) FROM steps WHERE state = 'pending' AND due_at < ?1", [HELD])?;
    Ok((complete_by, due))
}

/// After a reconciler pass: the earliest end of a timed wait, or deadline of a live task.
pub fn after_reconcile(t: &Tx<'_>) -> Result<Option<Timestamp>, StoreError> {
    let wait =
        min(t, "SELECT min(due_at) FROM steps WHERE kind = 'wait' AND state = 'processing' AND due_at < ?1", [HELD])?;
    let deadline = min(t, NEXT_DEADLINE, [])?;
    Ok(earliest(wait, deadline))
}

/// The earliest complete-by of a processing step, from `steps_processing`'s entries alone.
pub(crate) const NEXT_COMPLETE_BY: &str =
    "SELECT min(complete_by) FROM steps WHERE state = 'processing' AND complete_by < ?1";

/// The earliest end of a due attempt's claim timeout, from `steps_claim_by`'s entries alone (its
/// expression word for word); a paused task's steps end far past `?1`.
pub(crate) const NEXT_CLAIM_BY: &str = "SELECT min(min(due_at, 4611686018427387903) + claim_timeout_ms) FROM steps
      WHERE state = 'pending' AND claim_timeout_ms IS NOT NULL
        AND min(due_at, 4611686018427387903) + claim_timeout_ms < ?1";

/// The earliest deadline of a live task, by `tasks_deadline` (its condition word for word).
pub(crate) const NEXT_DEADLINE: &str = "SELECT min(deadline_at) FROM tasks INDEXED BY tasks_deadline
      WHERE deadline_at IS NOT NULL AND (state = 'running' OR state = 'paused' OR state = 'compensating')";

fn min(t: &Tx<'_>, sql: &str, p: impl Params) -> Result<Option<Timestamp>, StoreError> {
    let mut st = t.tx.prepare_cached(sql).map_err(map_err)?;
    let at: Option<i64> = st.query_row(p, |r| r.get(0)).map_err(map_err)?;
    Ok(at.map(Timestamp))
}

fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
