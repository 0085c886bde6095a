//! Event counts for the console's charts (see `shiftboss_store::rates`).

use crate::error::map_err;
use rusqlite::{Connection, params};
use shiftboss_store::{CountEvents, EventCounts, StoreError};

pub fn count(c: &Connection, p: &CountEvents) -> Result<EventCounts, StoreError> {
    let upto: i64 = c
        .prepare_cached("SELECT coalesce(max(id), 0) FROM events")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .map_err(map_err)?;
    let from = p.from(upto);
    let mut counts = Vec::new();
    if from < upto {
        let kinds = serde_json::to_string(&p.kinds).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
        let mut st = c
            .prepare_cached(
                "SELECT kind, count(*) FROM events
                  WHERE id > ?1 AND id <= ?2 AND kind IN (SELECT value FROM json_each(?3)) GROUP BY kind",
            )
            .map_err(map_err)?;
        let rows = st
            .query_map(params![from, upto, kinds], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(map_err)?;
        for r in rows {
            let (kind, n) = r.map_err(map_err)?;
            counts.push((kind, u64::try_from(n).unwrap_or(0)));
        }
    }
    Ok(EventCounts { upto, counts })
}
