//! When the sleeping roles should look next (idle load, issue 6). Each read runs inside the claim,
//! sweep or reconciler transaction it belongs to, so knowing the next time costs no transaction.
//! `steps_next_due` and `steps_deadline` make each `min` one index entry.

use crate::rows::get;
use crate::tx::Tx;
use shiftboss_core::Timestamp;
use shiftboss_store::advance::HELD;
use shiftboss_store::{ClaimDueSteps, StoreError};
use std::sync::LazyLock;

/// The earliest time after now at which a pending step becomes claimable by this claimer: its due
/// time, or for a step routed to a domain the claimer does not serve, its fallback time. Paused
/// tasks' steps (due at `HELD`) wait for a resume, which notifies.
pub async fn next_claimable(t: &Tx<'_>, p: &ClaimDueSteps) -> Result<Option<Timestamp>, StoreError> {
    static NEXT: LazyLock<String> = LazyLock::new(|| format!("SELECT {}", next_claimable_expr("$1", "$2", "$3", "$4")));
    let buckets: Option<Vec<i32>> = p.buckets.as_ref().map(|b| b.iter().map(|&x| i32::from(x)).collect());
    let row = t.query_one(&NEXT, &[&t.now.0, &p.agents, &buckets, &p.domains]).await?;
    Ok(get::<Option<i64>>(&row, 0)?.map(Timestamp))
}

/// [`next_claimable`] as an SQL expression, also part of the claim statement. The arguments name
/// what holds the time, the agents (text[]), the buckets (int[], NULL for all) and the claimer's
/// domains (text[]).
pub fn next_claimable_expr(now: &str, agents: &str, buckets: &str, domains: &str) -> String {
    format!(
        "least(
            (SELECT min(due_at) FROM steps
              WHERE state = 'pending' AND due_at > {now} AND due_at < {HELD} AND agent = ANY({agents})
                AND ({buckets}::int[] IS NULL OR bucket = ANY({buckets}))),
            (SELECT min(fallback_at) FROM steps
              WHERE state = 'pending' AND due_at <= {now} AND fallback_at > {now} AND agent = ANY({agents})
                AND ({buckets}::int[] IS NULL OR bucket = ANY({buckets})) AND domain IS NOT NULL
                AND NOT (domain = ANY({domains}))))"
    )
}

/// After a sweep: the earliest complete-by or claim timeout still ahead (an `alert_only` step past
/// its deadline has none; `steps_claim_by` holds the claim timeouts), and the earliest due time of a pending step (a claim, then a complete-by, may follow).
pub async fn after_sweep(t: &Tx<'_>) -> Result<(Option<Timestamp>, Option<Timestamp>), StoreError> {
    let row = t
        .query_one(
            "SELECT least((SELECT min(complete_by) FROM steps WHERE state = 'processing' AND complete_by < $1),
                          (SELECT min(least(due_at, 4611686018427387903) + claim_timeout_ms) FROM steps
                            WHERE state = 'pending' AND claim_timeout_ms IS NOT NULL
                              AND least(due_at, 4611686018427387903) + claim_timeout_ms < $1)),
                    (SELECT min(due_at) FROM steps WHERE state = 'pending' AND due_at < $1)",
            &[&HELD],
        )
        .await?;
    Ok((get::<Option<i64>>(&row, 0)?.map(Timestamp), get::<Option<i64>>(&row, 1)?.map(Timestamp)))
}

/// After a reconciler pass: the earliest end of a timed wait, or deadline of a live task.
pub async fn after_reconcile(t: &Tx<'_>) -> Result<Option<Timestamp>, StoreError> {
    let row = t
        .query_one(
            "SELECT least(
                (SELECT min(due_at) FROM steps WHERE kind = 'wait' AND state = 'processing' AND due_at < $1),
                (SELECT min(deadline_at) FROM tasks
                  WHERE deadline_at IS NOT NULL AND state IN ('running', 'paused', 'compensating')))",
            &[&HELD],
        )
        .await?;
    Ok(get::<Option<i64>>(&row, 0)?.map(Timestamp))
}
