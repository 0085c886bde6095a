//! Lapsed leases (P6, P17): the supervisor's sweep, and a restarted scheduler's release of what it held.

use crate::error::map_err;
use crate::tx::Tx;
use crate::writes::run_now;
use rusqlite::params;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepId, TaskId, Timestamp};
use shiftboss_store::advance::{self, HeldStep};
use shiftboss_store::lapse::Lapse;
use shiftboss_store::{ExpiryReport, LeaderTerm, StoreError};

const HELD_COLUMNS: &str = "id, task_id, agent, failure_count, lease_token, locked_by, retry, on_timeout, deadline_at";

fn read_held(r: &rusqlite::Row<'_>) -> rusqlite::Result<HeldStep> {
    let retry = crate::rows::retry_policy(r, 6)?;
    Ok(HeldStep {
        id: StepId(r.get(0)?),
        task_id: TaskId(r.get(1)?),
        agent: r.get(2)?,
        failure_count: r.get(3)?,
        lease_token: r.get(4)?,
        locked_by: r.get(5)?,
        retry,
        on_timeout: OnTimeout::parse(&r.get::<_, String>(7)?).unwrap_or_default(),
        deadline_at: r.get::<_, Option<i64>>(8)?.map(Timestamp),
    })
}

pub fn check_leader(t: &Tx<'_>, leader: &LeaderTerm) -> Result<(), StoreError> {
    let live: i64 =
        t.tx.query_row(
            "SELECT count(*) FROM leaders WHERE name = ?1 AND holder = ?2 AND term = ?3 AND expires_at > ?4",
            params![leader.name, leader.holder.as_str(), leader.term, t.now.0],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    if live == 1 { Ok(()) } else { Err(StoreError::NotLeader(leader.name.clone())) }
}

/// Processing steps past their complete-by, earliest first. `steps_processing` holds the
/// processing steps only, complete-by included, so the scan reads rows only for lapsed ones.
pub(crate) fn expired_sql() -> String {
    format!(
        "SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND complete_by <= ?1 ORDER BY complete_by LIMIT ?2"
    )
}

/// Due attempts no one claimed within their claim timeout, earliest first, by `steps_claim_by`
/// (its expression word for word).
pub(crate) const UNCLAIMED_SQL: &str = "SELECT id, task_id, agent, failure_count, lease_token, locked_by, retry, \
     on_timeout, deadline_at FROM steps \
     WHERE state = 'pending' AND claim_timeout_ms IS NOT NULL AND min(due_at, 4611686018427387903) + claim_timeout_ms <= ?1 \
     ORDER BY min(due_at, 4611686018427387903) + claim_timeout_ms LIMIT ?2";

pub fn expire_leases(
    t: &Tx<'_>,
    leader: &LeaderTerm,
    limit: u32,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    check_leader(t, leader)?;
    let held = select_held(t, &expired_sql(), params![t.now.0, limit])?;
    let actor = format!("supervisor:{}", leader.holder);
    let mut report = take_back(t, held, policies, Lapse::Expired, &actor)?;
    let unclaimed = select_held(t, UNCLAIMED_SQL, params![t.now.0, limit])?;
    if !unclaimed.is_empty() {
        let more = take_back(t, unclaimed, policies, Lapse::Unclaimed, &actor)?;
        report.retried += more.retried;
        report.gave_up += more.gave_up;
    }
    Ok(report)
}

pub fn release_instance_claims(
    t: &Tx<'_>,
    instance: &str,
    policies: &RetryPolicies,
) -> Result<ExpiryReport, StoreError> {
    let sql = format!("SELECT {HELD_COLUMNS} FROM steps WHERE state = 'processing' AND locked_by = ?1");
    let held = select_held(t, &sql, params![instance])?;
    take_back(t, held, policies, Lapse::Released, instance)
}

fn select_held(t: &Tx<'_>, sql: &str, p: impl rusqlite::Params) -> Result<Vec<HeldStep>, StoreError> {
    let mut st = t.tx.prepare_cached(sql).map_err(map_err)?;
    let rows = st.query_map(p, read_held).map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

fn take_back(
    t: &Tx<'_>,
    held: Vec<HeldStep>,
    policies: &RetryPolicies,
    lapse: Lapse,
    actor: &str,
) -> Result<ExpiryReport, StoreError> {
    run_now(advance::take_back(t, held, policies, lapse, actor))
}
