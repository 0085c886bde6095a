//! Leader leases (P10): one row per leader-only role, taken over only once it has lapsed.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use shiftboss_core::Timestamp;
use shiftboss_store::{ElectLeader, LeaderTerm, StoreError};

pub fn elect(t: &Tx<'_>, p: &ElectLeader) -> Result<Option<LeaderTerm>, StoreError> {
    let expires_at = t.now.plus(p.ttl);
    let row: Option<(String, i64, i64)> =
        t.tx.query_row("SELECT holder, term, expires_at FROM leaders WHERE name = ?1", [&p.name], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()
        .map_err(map_err)?;
    let term = match row {
        None => {
            t.tx.execute(
                "INSERT INTO leaders (name, holder, term, expires_at) VALUES (?1, ?2, 1, ?3)",
                params![p.name, p.holder.as_str(), expires_at.0],
            )
            .map_err(map_err)?;
            1
        }
        // A live lease of our own: renew it, same term.
        Some((holder, term, exp)) if holder == p.holder.as_str() && exp > t.now.0 => {
            t.tx.execute("UPDATE leaders SET expires_at = ?2 WHERE name = ?1", params![p.name, expires_at.0])
                .map_err(map_err)?;
            term
        }
        // Lapsed (ours or another's): a new term, so that writes of the old one are refused.
        Some((_, term, exp)) if exp <= t.now.0 => {
            t.tx.execute(
                "UPDATE leaders SET holder = ?2, term = ?3, expires_at = ?4 WHERE name = ?1",
                params![p.name, p.holder.as_str(), term + 1, expires_at.0],
            )
            .map_err(map_err)?;
            term + 1
        }
        Some(_) => return Ok(None),
    };
    Ok(Some(LeaderTerm { name: p.name.clone(), holder: p.holder.clone(), term, expires_at }))
}

pub fn resign(t: &Tx<'_>, term: &LeaderTerm) -> Result<(), StoreError> {
    t.tx.execute(
        "UPDATE leaders SET expires_at = ?4 WHERE name = ?1 AND holder = ?2 AND term = ?3",
        params![term.name, term.holder.as_str(), term.term, Timestamp(0).0],
    )
    .map_err(map_err)?;
    Ok(())
}
