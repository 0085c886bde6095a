//! Live schedulers (M3): each heartbeat extends a scheduler's row; the live rows decide how the
//! load-balance buckets are shared. One upsert per heartbeat, so concurrent heartbeats never race.

use crate::rows::get;
use crate::tx::Tx;
use shiftboss_core::InstanceId;
use shiftboss_core::buckets::Member;
use shiftboss_store::{Heartbeat, StoreError};
use std::time::Duration;

/// Rows of schedulers silent for this long are deleted, so the table stays small.
const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

pub async fn heartbeat(t: &Tx<'_>, p: &Heartbeat) -> Result<Vec<Member>, StoreError> {
    let weight = i32::try_from(p.weight.max(1)).unwrap_or(i32::MAX);
    t.execute(
        "INSERT INTO schedulers (instance, weight, seen_at, expires_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (instance) DO UPDATE SET weight = excluded.weight, seen_at = excluded.seen_at,
                                              expires_at = excluded.expires_at",
        &[&p.instance.as_str(), &weight, &t.now.0, &t.now.plus(p.ttl).0],
    )
    .await?;
    let forget_before = t.now.0 - shiftboss_core::time::duration_ms(FORGET_AFTER);
    t.execute("DELETE FROM schedulers WHERE expires_at < $1", &[&forget_before]).await?;
    let rows =
        t.query("SELECT instance, weight FROM schedulers WHERE expires_at > $1 ORDER BY instance", &[&t.now.0]).await?;
    rows.iter().map(|r| Ok(Member { instance: get(r, 0)?, weight: get::<i32>(r, 1)?.max(1) as u32 })).collect()
}

pub async fn sign_off(t: &Tx<'_>, instance: &InstanceId) -> Result<(), StoreError> {
    t.execute("DELETE FROM schedulers WHERE instance = $1", &[&instance.as_str()]).await?;
    Ok(())
}
