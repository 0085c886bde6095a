//! Event counts for the console's charts (see `shiftboss_store::rates`).

use crate::rows::get;
use crate::tx::Conn;
use shiftboss_store::{CountEvents, EventCounts, StoreError};

pub async fn count(c: Conn<'_>, p: &CountEvents) -> Result<EventCounts, StoreError> {
    // The newest id by the primary key's end, not by the sequence: a sequence is ahead of the
    // table by the ids of transactions that rolled back or still run.
    let upto: i64 = get(&c.query_one("SELECT coalesce(max(id), 0) FROM events", &[]).await?, 0)?;
    let from = p.from(upto);
    let mut counts = Vec::new();
    if from < upto {
        let rows = c
            .query(
                "SELECT kind, count(*) FROM events WHERE id > $1 AND id <= $2 AND kind = ANY($3) GROUP BY kind",
                &[&from, &upto, &p.kinds],
            )
            .await?;
        for r in &rows {
            counts.push((get::<String>(r, 0)?, u64::try_from(get::<i64>(r, 1)?).unwrap_or(0)));
        }
    }
    Ok(EventCounts { upto, counts })
}
