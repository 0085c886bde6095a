//! What every write operation works with: the open transaction, the store's time, the definitions.

use crate::error::map_err;
use rusqlite::{OptionalExtension, Transaction, params};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepId, TaskId, Timestamp};
use shiftboss_store::{MessageKind, StoreError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// Parsed definitions by (name, version). A version never changes once registered, so entries
/// never go stale.
#[derive(Default)]
pub struct DefCache(Mutex<HashMap<(String, u32), Arc<WorkflowDef>>>);

pub struct Tx<'a> {
    pub tx: &'a Transaction<'a>,
    pub now: Timestamp,
    pub defs: &'a DefCache,
    /// Events written by this transaction and not yet inserted: `flush_events` inserts them in
    /// order, many rows per statement, before the commit (and before anything reads events).
    events: RefCell<Vec<NewEvent>>,
    /// Set when flushing events wrote deliveries (see `outbox`): the store rings this
    /// process's dispatchers after the commit.
    pub outbox: std::cell::Cell<bool>,
}

/// An event waiting for `flush_events`.
struct NewEvent {
    task: TaskId,
    step: Option<StepId>,
    kind: &'static str,
    level: EventLevel,
    actor: String,
    detail: String,
}

/// Rows per INSERT of `flush_events`: a batch goes out in statements of these sizes, largest
/// first, so that three cached statements cover any count.
const EVENT_CHUNKS: [usize; 3] = [64, 8, 1];
/// The columns each event binds.
const EVENT_COLUMNS: usize = 7;

impl<'a> Tx<'a> {
    pub fn new(tx: &'a Transaction<'a>, now: Timestamp, defs: &'a DefCache) -> Tx<'a> {
        Tx { tx, now, defs, events: RefCell::new(Vec::new()), outbox: std::cell::Cell::new(false) }
    }
}

/// The INSERT of `rows` events, for each size of `EVENT_CHUNKS`.
fn insert_events_sql(rows: usize) -> &'static str {
    static SQL: LazyLock<Vec<(usize, String)>> = LazyLock::new(|| {
        let sql = |rows: usize| {
            let values: Vec<String> = (0..rows)
                .map(|i| {
                    let p = i * EVENT_COLUMNS;
                    format!("(?{}, ?{}, ?{}, ?{}, ?{}, ?{}, ?{})", p + 1, p + 2, p + 3, p + 4, p + 5, p + 6, p + 7)
                })
                .collect();
            format!(
                "INSERT INTO events (task_id, step_id, at, kind, level, actor, detail) VALUES {}",
                values.join(", ")
            )
        };
        EVENT_CHUNKS.into_iter().map(|n| (n, sql(n))).collect()
    });
    SQL.iter().find(|(n, _)| *n == rows).map(|(_, s)| s.as_str()).expect("a size of EVENT_CHUNKS")
}

impl Tx<'_> {
    /// Records an event of this transaction. It reaches the table at `flush_events`, which the
    /// store runs before every commit: one statement per event cost a drain about a sixth of its
    /// time (each also rewrote AUTOINCREMENT's counter row), where one for 64 costs little more
    /// than one.
    pub fn event(
        &self,
        task: TaskId,
        step: Option<StepId>,
        kind: &'static str,
        level: EventLevel,
        actor: &str,
        detail: serde_json::Value,
    ) -> Result<(), StoreError> {
        self.event_text(task, step, kind, level, actor, detail.to_string());
        Ok(())
    }

    /// `event` with its detail already written as JSON text: the claim writes one per claimed step,
    /// and building a JSON value only to print it cost as much as inserting the row.
    pub fn event_text(
        &self,
        task: TaskId,
        step: Option<StepId>,
        kind: &'static str,
        level: EventLevel,
        actor: &str,
        detail: String,
    ) {
        self.events.borrow_mut().push(NewEvent { task, step, kind, level, actor: actor.to_owned(), detail });
    }

    /// Inserts the events recorded so far, in the order they were recorded (their ids follow it).
    /// The store calls it before committing, and whatever reads the events table in a write
    /// transaction calls it first.
    pub fn flush_events(&self) -> Result<(), StoreError> {
        let events = std::mem::take(&mut *self.events.borrow_mut());
        if events.is_empty() {
            return Ok(());
        }
        // The message events, with the ids they got: a chunk's rows take consecutive ids (one
        // writer; AUTOINCREMENT gives each row the largest id so far plus one), its last one
        // `last_insert_rowid`.
        let mut messages = Vec::new();
        let mut rest = &events[..];
        while !rest.is_empty() {
            let rows = EVENT_CHUNKS.into_iter().find(|&n| n <= rest.len()).unwrap_or(1);
            let (chunk, after) = rest.split_at(rows);
            let mut st = self.tx.prepare_cached(insert_events_sql(rows)).map_err(map_err)?;
            for (i, e) in chunk.iter().enumerate() {
                let at = i * EVENT_COLUMNS;
                st.raw_bind_parameter(at + 1, e.task.0).map_err(map_err)?;
                st.raw_bind_parameter(at + 2, e.step.map(|s| s.0)).map_err(map_err)?;
                st.raw_bind_parameter(at + 3, self.now.0).map_err(map_err)?;
                st.raw_bind_parameter(at + 4, e.kind).map_err(map_err)?;
                st.raw_bind_parameter(at + 5, e.level.as_str()).map_err(map_err)?;
                st.raw_bind_parameter(at + 6, e.actor.as_str()).map_err(map_err)?;
                st.raw_bind_parameter(at + 7, e.detail.as_str()).map_err(map_err)?;
            }
            st.raw_execute().map_err(map_err)?;
            let first = self.tx.last_insert_rowid() - chunk.len() as i64 + 1;
            for (id, e) in (first..).zip(chunk) {
                if MessageKind::of_event(e.kind).is_some() {
                    messages.push(id);
                }
            }
            rest = after;
        }
        if crate::outbox::write(self, &messages)? {
            self.outbox.set(true);
        }
        Ok(())
    }

    /// A registered definition, from the cache or the table.
    pub fn definition(&self, name: &str, version: u32) -> Result<Arc<WorkflowDef>, StoreError> {
        let key = (name.to_owned(), version);
        if let Some(d) = self.defs.0.lock().expect("definition cache poisoned").get(&key) {
            return Ok(d.clone());
        }
        let text: Option<String> = self
            .tx
            .query_row(
                "SELECT definition FROM workflows WHERE name = ?1 AND version = ?2",
                params![name, version],
                |r| r.get(0),
            )
            .optional()
            .map_err(map_err)?;
        let text = text.ok_or_else(|| StoreError::NotFound { what: "workflow", id: format!("{name} v{version}") })?;
        let def: WorkflowDef = serde_json::from_str(&text).map_err(|e| {
            StoreError::Incompatible(format!("stored definition of {name} v{version} does not parse: {e}"))
        })?;
        let def = Arc::new(def);
        self.defs.0.lock().expect("definition cache poisoned").insert(key, def.clone());
        Ok(def)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type EventRow = (i64, Option<i64>, i64, String, String, String, String);
    const KINDS: [&str; 3] = ["kind.a", "kind.b", "kind.c"];

    /// 75 events go out as 64 + 8 + 1 + 1 + 1 rows: each lands with its own fields, in order.
    #[test]
    fn flushed_events_keep_their_fields_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn =
            crate::open::open_connection(&dir.path().join("events.db"), &crate::open::OpenOptions::default()).unwrap();
        let defs = DefCache::default();
        let tx = conn.transaction().unwrap();
        let t = Tx::new(&tx, Timestamp(1234), &defs);
        for i in 0..75i64 {
            let level = if i % 2 == 0 { EventLevel::Info } else { EventLevel::Alert };
            let step = (i % 3 != 0).then_some(StepId(i * 10));
            t.event(TaskId(i), step, KINDS[i as usize % 3], level, &format!("actor-{i}"), json!({"n": i})).unwrap();
        }
        let none: i64 = tx.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        assert_eq!(none, 0, "recorded events wait for the flush");
        t.flush_events().unwrap();
        t.flush_events().unwrap();
        let mut st =
            tx.prepare("SELECT task_id, step_id, at, kind, level, actor, detail FROM events ORDER BY id").unwrap();
        let rows: Vec<EventRow> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 75, "each event once, a second flush adds nothing");
        for (i, row) in rows.into_iter().enumerate() {
            let i = i as i64;
            let level = if i % 2 == 0 { "info" } else { "alert" };
            let step = (i % 3 != 0).then_some(i * 10);
            let expected = (
                i,
                step,
                1234,
                KINDS[i as usize % 3].to_owned(),
                level.to_owned(),
                format!("actor-{i}"),
                json!({"n": i}).to_string(),
            );
            assert_eq!(row, expected);
        }
    }
}
