//! The event log as a stream. SQLite has one writer, and ids are handed out inside its
//! transactions, so commits come in id order: every event a read transaction sees is settled, and
//! the highest id handed out (`sqlite_sequence`, read in the same snapshot) bounds what it can see.

use crate::error::map_err;
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params_from_iter};
use shiftboss_store::stream::{LATEST, advance, scan_end};
use shiftboss_store::{EventCursor, EventsRead, ReadEvents, StoreError, StreamEvent};

/// Runs inside the store's read transaction (one snapshot for the horizon and the rows).
pub fn read_events(c: &Connection, p: &ReadEvents) -> Result<EventsRead, StoreError> {
    let top: i64 = c
        .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'events'", [], |r| r.get(0))
        .optional()
        .map_err(map_err)?
        .unwrap_or(0);
    if p.cursor.after == LATEST {
        return Ok(EventsRead { events: Vec::new(), cursor: EventCursor::after(top), again: false });
    }
    let after = p.cursor.after;
    let end = scan_end(after, top);
    if end <= after {
        return Ok(EventsRead { events: Vec::new(), cursor: EventCursor::after(after), again: false });
    }
    let (sql, values) = statement(p, after, end);
    let mut st = c.prepare_cached(&sql).map_err(map_err)?;
    let rows = st
        .query_map(params_from_iter(values), |r| {
            Ok(StreamEvent {
                event: crate::rows::event(r)?,
                task_key: r.get(8)?,
                workflow: r.get(9)?,
                step: r.get(10)?,
            })
        })
        .map_err(map_err)?;
    let events = rows.collect::<Result<Vec<_>, _>>().map_err(map_err)?;
    let (after, full) = advance(after, end, &events, p.limit);
    Ok(EventsRead { events, cursor: EventCursor::after(after), again: full || after < top })
}

/// One SELECT over the hot tables and history (a task's events are in one of them with its task
/// row: the archiver moves them together), with only the filters given.
fn statement(p: &ReadEvents, after: i64, end: i64) -> (String, Vec<Value>) {
    let mut values = vec![Value::Integer(after), Value::Integer(end)];
    let mut conditions = vec!["e.id > ?1".to_owned(), "e.id <= ?2".to_owned()];
    let mut add = |condition: &str, v: Value, values: &mut Vec<Value>| {
        values.push(v);
        conditions.push(condition.replace('?', &format!("?{}", values.len())));
    };
    let f = &p.filter;
    if let Some(t) = f.task_id {
        add("e.task_id = ?", Value::Integer(t.0), &mut values);
    }
    if let Some(w) = &f.workflow {
        add("t.workflow = ?", Value::Text(w.clone()), &mut values);
    }
    if let Some((lo, hi)) = f.key_range() {
        add("t.task_key >= ?", Value::Text(lo.into()), &mut values);
        if let Some(hi) = hi {
            add("t.task_key < ?", Value::Text(hi), &mut values);
        }
    }
    if !f.kinds.is_empty() {
        let first = values.len() + 1;
        values.extend(f.kinds.iter().map(|k| Value::Text(k.clone())));
        let marks: Vec<String> = (first..=values.len()).map(|i| format!("?{i}")).collect();
        conditions.push(format!("e.kind IN ({})", marks.join(", ")));
    }
    values.push(Value::Integer(i64::from(p.limit)));
    let limit = values.len();
    let filter = conditions.join(" AND ");
    // The step's name by the task's index (history's steps have no index on their id).
    let page = |events: &str, tasks: &str, steps: &str| {
        format!(
            "SELECT e.id, e.task_id, e.step_id, e.at, e.kind, e.level, e.actor, e.detail, t.task_key, t.workflow,
                    (SELECT s.name FROM {steps} s WHERE s.task_id = e.task_id AND s.id = e.step_id) AS step_name
               FROM {events} e JOIN {tasks} t ON t.id = e.task_id
              WHERE {filter} ORDER BY e.id LIMIT ?{limit}"
        )
    };
    let sql = format!(
        "SELECT * FROM ({}) UNION ALL SELECT * FROM ({}) ORDER BY 1 LIMIT ?{limit}",
        page("events", "tasks", "steps"),
        page("events_history", "tasks_history", "steps_history")
    );
    (sql, values)
}
