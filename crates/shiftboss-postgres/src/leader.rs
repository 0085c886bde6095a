//! Leader leases (P10): one row per leader-only role, taken over only once it has lapsed.
//!
//! An election is one INSERT ... ON CONFLICT DO UPDATE ... WHERE: PostgreSQL locks the existing row
//! and evaluates the WHERE on its newest version, so two instances electing at once are serialised
//! on the row and at most one of them gets a new term. No read-then-write to race on.

use crate::rows::get;
use crate::tx::Tx;
use shiftboss_store::{ElectLeader, LeaderTerm, StoreError};

/// The same rules as the SQLite store's: a first caller gets term 1; the holder renews a live
/// lease in the same term; anyone takes a lapsed lease (its own included) in a new term; a live
/// lease of another holder is left alone (no row returned).
const ELECT: &str = "
INSERT INTO leaders AS l (name, holder, term, expires_at) VALUES ($1, $2, 1, $3)
ON CONFLICT (name) DO UPDATE
   SET term = CASE WHEN l.holder = excluded.holder AND l.expires_at > $4 THEN l.term ELSE l.term + 1 END,
       holder = excluded.holder,
       expires_at = excluded.expires_at
 WHERE l.holder = excluded.holder OR l.expires_at <= $4
RETURNING term";

pub async fn elect(t: &Tx<'_>, p: &ElectLeader) -> Result<Option<LeaderTerm>, StoreError> {
    let expires_at = t.now.plus(p.ttl);
    let row = t.query_opt(ELECT, &[&p.name, &p.holder.as_str(), &expires_at.0, &t.now.0]).await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(LeaderTerm { name: p.name.clone(), holder: p.holder.clone(), term: get(&row, 0)?, expires_at }))
}

pub async fn resign(t: &Tx<'_>, term: &LeaderTerm) -> Result<(), StoreError> {
    t.execute(
        "UPDATE leaders SET expires_at = 0 WHERE name = $1 AND holder = $2 AND term = $3",
        &[&term.name, &term.holder.as_str(), &term.term],
    )
    .await?;
    Ok(())
}
