//! What every write operation works with: the open transaction, the store's time, the definitions.

use crate::error::map_err;
use rusqlite::{OptionalExtension, Transaction, params};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepId, TaskId, Timestamp};
use shiftboss_store::StoreError;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Parsed definitions by (name, version). A version never changes once registered, so entries
/// never go stale.
#[derive(Default)]
pub struct DefCache(Mutex<HashMap<(String, u32), Arc<WorkflowDef>>>);

pub struct Tx<'a> {
    pub tx: &'a Transaction<'a>,
    pub now: Timestamp,
    pub defs: &'a DefCache,
    /// Tasks whose decider is running in this transaction, each with a flag raised when a child
    /// task changed one of its steps meanwhile (it then decides again rather than recursing).
    pub advancing: RefCell<Vec<(TaskId, bool)>>,
}

impl<'a> Tx<'a> {
    pub fn new(tx: &'a Transaction<'a>, now: Timestamp, defs: &'a DefCache) -> Tx<'a> {
        Tx { tx, now, defs, advancing: RefCell::new(Vec::new()) }
    }
}

impl Tx<'_> {
    pub fn event(
        &self,
        task: TaskId,
        step: Option<StepId>,
        kind: &str,
        level: EventLevel,
        actor: &str,
        detail: serde_json::Value,
    ) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO events (task_id, step_id, at, kind, level, actor, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    task.0,
                    step.map(|s| s.0),
                    self.now.0,
                    kind,
                    level.as_str(),
                    actor,
                    detail.to_string()
                ])
            })
            .map_err(map_err)?;
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
