//! Live schedulers (M3): each heartbeat extends a scheduler's row; the live rows decide how the
//! load-balance buckets are shared.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::params;
use shiftboss_core::InstanceId;
use shiftboss_core::buckets::Member;
use shiftboss_store::{Heartbeat, StoreError};
use std::time::Duration;

/// Rows of schedulers silent for this long are deleted, so the table stays small.
const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

pub fn heartbeat(t: &Tx<'_>, p: &Heartbeat) -> Result<Vec<Member>, StoreError> {
    t.tx.execute(
        "INSERT INTO schedulers (instance, weight, seen_at, expires_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (instance) DO UPDATE SET weight = excluded.weight, seen_at = excluded.seen_at,
                                              expires_at = excluded.expires_at",
        params![p.instance.as_str(), p.weight.max(1), t.now.0, t.now.plus(p.ttl).0],
    )
    .map_err(map_err)?;
    let forget_before = t.now.0 - shiftboss_core::time::duration_ms(FORGET_AFTER);
    t.tx.execute("DELETE FROM schedulers WHERE expires_at < ?1", [forget_before]).map_err(map_err)?;
    let mut st =
        t.tx.prepare_cached("SELECT instance, weight FROM schedulers WHERE expires_at > ?1 ORDER BY instance")
            .map_err(map_err)?;
    let rows = st.query_map([t.now.0], |r| Ok(Member { instance: r.get(0)?, weight: r.get(1)? })).map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

pub fn sign_off(t: &Tx<'_>, instance: &InstanceId) -> Result<(), StoreError> {
    t.tx.execute("DELETE FROM schedulers WHERE instance = ?1", [instance.as_str()]).map_err(map_err)?;
    Ok(())
}
