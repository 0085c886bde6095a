//! Lapsed leases (P6, P17): the supervisor's sweep, and a restarted scheduler's release of what it held.
//!
//! The held steps are read without locks, then their tasks are locked (ascending ids, see
//! `lock_tasks`), then each step is taken back by an UPDATE fenced by the lease token it was read
//! with and `state = 'processing'`. A step that a reply, a cancel or another sweep moved in the
//! meantime fails the fence and is skipped: each expiry is counted once. Steps are never locked
//! before their task, so a sweep and a batch of replies cannot deadlock.
//!
//! A step whose policy is `alert_only` is not taken back when its complete-by passes: it keeps its
//! holder, with no deadline left, and an alert says so.
//!
//! The sweep also times out due attempts that no one claimed within their claim timeout (Conductor's
//! pollTimeoutSeconds), by the step's timeout policy.

use crate::error::bad_column;
use crate::rows::{count, get, retry_policy};
use crate::tx::Tx;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepId, TaskId, Timestamp};
use shiftboss_store::advance::{self, HeldStep};
use shiftboss_store::lapse::Lapse;
use shiftboss_store::{ExpiryReport, LeaderTerm, StoreError};
use tokio_postgres::Row;

const HELD_COLUMNS: &str = "id, task_id, agent, failure_count, lease_token, locked_by, retry, on_timeout, deadline_at";

fn read_held(r: &Row) -> Result<HeldStep, StoreError> {
    Ok(HeldStep {
        id: StepId(get(r, 0)?),
        task_id: TaskId(get(r, 1)?),
        agent: get(r, 2)?,
        failure_count: count(r, 3, "steps.failure_count")?,
        lease_token: get(r, 4)?,
        locked_by: get(r, 5)?,
        retry: retry_policy(r, 6)?,
        on_timeout: parsed_on_timeout(get(r, 7)?)?,
        deadline_at: get::<Option<i64>>(r, 8)?.map(Timestamp),
    })
}

fn parsed_on_timeout(text: &str) -> Result<OnTimeout, StoreError> {
    OnTimeout::parse(text).ok_or_else(|| bad_column("steps.on_timeout", format!("unknown policy {text:?}")))
}

/// Refuses a leader-only write unless `leader`'s term is live by the store's clock.
///
/// FOR SHARE keeps the lease row as it is until this transaction ends: another instance cannot be
/// elected (a new term written) while the sweep runs, so the whole sweep is fenced by the term,
/// not only its first statement. If an election is committing, this waits for it and then sees
/// the new term.
pub async fn check_leader(t: &Tx<'_>, leader: &LeaderTerm) -> Result<(), StoreError> {
    let live = t
        .query_opt(
            "SELECT 1 FROM leaders WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at > $4 FOR SHARE",
            &[&leader.name, &leader.holder.as_str(), &leader.term, &t.now.0],
        )
        .await?;
    if live.is_some() { Ok(()) } else { Err(StoreError::NotLeader(leader.name.clone())) }
}

pub async fn expire_leases(
    t: &Tx<'_>,
    leader: &LeaderTerm,
    limit: u32,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    check_leader(t, leader).await?;
    let sql = format!(
        "SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND complete_by <= $1 ORDER BY complete_by LIMIT $2"
    );
    let rows = t.query(&sql, &[&t.now.0, &i64::from(limit)]).await?;
    let held = rows.iter().map(read_held).collect::<Result<Vec<_>, _>>()?;
    let actor = format!("supervisor:{}", leader.holder);
    let mut report = advance::take_back(t, held, policies, Lapse::Expired, &actor).await?;
    // Due attempts no one claimed within their claim timeout, by `steps_claim_by` (its expression
    // word for word), fenced like a take-back (their lease token, `state = 'pending'`).
    let sql = format!(
        "SELECT {HELD_COLUMNS} FROM steps
          WHERE state = 'pending' AND claim_timeout_ms IS NOT NULL
            AND least(due_at, 4611686018427387903) + claim_timeout_ms <= $1
          ORDER BY least(due_at, 4611686018427387903) + claim_timeout_ms LIMIT $2"
    );
    let rows = t.query(&sql, &[&t.now.0, &i64::from(limit)]).await?;
    if !rows.is_empty() {
        let unclaimed = rows.iter().map(read_held).collect::<Result<Vec<_>, _>>()?;
        let more = advance::take_back(t, unclaimed, policies, Lapse::Unclaimed, &actor).await?;
        report.retried += more.retried;
        report.gave_up += more.gave_up;
    }
    Ok(report)
}

pub async fn release_instance_claims(
    t: &Tx<'_>,
    instance: &str,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    let sql = format!("SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND locked_by = $1 ORDER BY id");
    let rows = t.query(&sql, &[&instance]).await?;
    let held = rows.iter().map(read_held).collect::<Result<Vec<_>, _>>()?;
    advance::take_back(t, held, policies, Lapse::Released, instance).await
}
