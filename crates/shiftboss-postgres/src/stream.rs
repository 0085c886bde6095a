//! The event log as a stream, settled against out-of-order commits.
//!
//! Event ids come from a sequence when a row is inserted, and transactions commit in any order, so
//! a reader that saw id 10 may later see id 9 commit. A read therefore returns only ids that are
//! settled. It reads the highest id handed out so far (`drawn`); when that is past what it knows
//! to be settled, it takes a fence: THEN a transaction id of its own (`horizon`, in a statement
//! that commits at once), above every transaction id handed out before. Every id up to `drawn`
//! was drawn by a transaction that held its transaction id before drawing (the column's default,
//! migration 12), so below `horizon`. Once the oldest running transaction of a later snapshot is
//! at or above `horizon` (`pg_snapshot_xmin`: everything below it has ended), every id up to
//! `drawn` is committed and visible, or never will be. ARCHITECTURE.md, "Event streams", has the
//! whole argument, and why the snapshot's `xmax` cannot stand in for the reader's own id.

use crate::rows::get;
use crate::tx::Conn;
use shiftboss_store::stream::{LATEST, advance, scan_end};
use shiftboss_store::{EventCursor, EventFence, EventsRead, ReadEvents, StoreError, StreamEvent};
use tokio_postgres::types::ToSql;

pub async fn read_events(c: Conn<'_>, p: &ReadEvents) -> Result<EventsRead, StoreError> {
    // Each statement on its own (autocommit), in this order: the sequence is read outside any
    // snapshot, and the horizon must be taken after it (see the module's comment).
    let drawn: i64 = get(
        &c.query_one("SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM events_id_seq", &[])
            .await?,
        0,
    )?;
    if p.cursor.after == LATEST {
        // Ids drawn before now that commit later are before the start: left out, as asked.
        return Ok(EventsRead { events: Vec::new(), cursor: EventCursor::after(drawn), again: false });
    }
    let mut settled = p.cursor.settled.max(p.cursor.after);
    let mut fence = p.cursor.fence.filter(|f| f.id > settled);
    if drawn > settled {
        let f = match fence {
            Some(f) => f,
            None => {
                let horizon = get(&c.query_one("SELECT pg_current_xact_id()::text::bigint", &[]).await?, 0)?;
                EventFence { id: drawn, horizon }
            }
        };
        let oldest: i64 =
            get(&c.query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint", &[]).await?, 0)?;
        (settled, fence) = settle(settled, f, oldest);
    }
    let after = p.cursor.after;
    let end = scan_end(after, settled);
    let mut events = Vec::new();
    if end > after {
        let (sql, values) = statement(p, after, end);
        let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect();
        for r in c.query(&sql, &params).await? {
            events.push(StreamEvent {
                event: crate::rows::event(&r)?,
                task_key: get(&r, 8)?,
                workflow: get(&r, 9)?,
                step: get(&r, 10)?,
            });
        }
    }
    let (after, full) = advance(after, end, &events, p.limit);
    let cursor = EventCursor { after, settled, fence };
    Ok(EventsRead { events, cursor, again: full || end < settled || fence.is_some() })
}

/// What is settled given a fence and the oldest transaction running now: the fence's ids once
/// every transaction below its horizon has ended (the fence is then spent), else nothing new
/// (the fence is kept: a newer one would move the wait on, and a reader under steady load would
/// never settle anything).
pub fn settle(settled: i64, fence: EventFence, oldest: i64) -> (i64, Option<EventFence>) {
    if oldest >= fence.horizon { (settled.max(fence.id), None) } else { (settled, Some(fence)) }
}

type Values = Vec<Box<dyn ToSql + Sync + Send>>;

/// One SELECT over the hot tables and history (a task's events are in one of them with its task
/// row: the archiver moves them together in one transaction), with only the filters given.
fn statement(p: &ReadEvents, after: i64, end: i64) -> (String, Values) {
    let mut values: Values = vec![Box::new(after), Box::new(end)];
    let mut conditions = vec!["e.id > $1".to_owned(), "e.id <= $2".to_owned()];
    let mut add = |condition: &str, v: Box<dyn ToSql + Sync + Send>| {
        values.push(v);
        conditions.push(condition.replace('?', &format!("${}", values.len())));
    };
    let f = &p.filter;
    if let Some(t) = f.task_id {
        add("e.task_id = ?", Box::new(t.0));
    }
    if let Some(w) = &f.workflow {
        add("t.workflow = ?", Box::new(w.clone()));
    }
    // Byte order whatever the database's collation (as the task listing does).
    if let Some((lo, hi)) = f.key_range() {
        add("t.task_key COLLATE \"C\" >= ?", Box::new(lo.to_owned()));
        if let Some(hi) = hi {
            add("t.task_key COLLATE \"C\" < ?", Box::new(hi));
        }
    }
    if !f.kinds.is_empty() {
        add("e.kind = ANY(?)", Box::new(f.kinds.clone()));
    }
    add("TRUE", Box::new(i64::from(p.limit)));
    let limit = values.len();
    let filter = conditions.join(" AND ");
    // The step's name by the task's index (history's steps have no index on their id).
    let page = |events: &str, tasks: &str, steps: &str| {
        format!(
            "SELECT e.id, e.task_id, e.step_id, e.at, e.kind, e.level, e.actor, e.detail, t.task_key, t.workflow,
                    (SELECT s.name FROM {steps} s WHERE s.task_id = e.task_id AND s.id = e.step_id) AS step_name
               FROM {events} e JOIN {tasks} t ON t.id = e.task_id
              WHERE {filter} ORDER BY e.id LIMIT ${limit}"
        )
    };
    let sql = format!(
        "SELECT * FROM ({}) AS live UNION ALL SELECT * FROM ({}) AS old ORDER BY 1 LIMIT ${limit}",
        page("events", "tasks", "steps"),
        page("events_history", "tasks_history", "steps_history")
    );
    (sql, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_settles_only_once_every_transaction_below_its_horizon_has_ended() {
        let f = EventFence { id: 9, horizon: 100 };
        assert_eq!(settle(3, f, 95), (3, Some(f)), "95 still runs");
        assert_eq!(settle(3, f, 100), (9, None), "everything below 100 has ended");
        assert_eq!(settle(12, f, 101), (12, None), "never back");
    }
}
