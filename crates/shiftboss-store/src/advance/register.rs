//! Registering a workflow definition: what every store checks before and after its insert.

use crate::{RegisterOutcome, StoreError};
use shiftboss_core::workflow::WorkflowDef;

/// The definition as stored (JSON text), once it is valid.
pub fn definition_text(def: &WorkflowDef) -> Result<String, StoreError> {
    def.validate().map_err(|e| StoreError::InvalidInput(format!("workflow {}: {e}", def.name)))?;
    serde_json::to_string(def).map_err(|e| StoreError::InvalidInput(format!("workflow {}: {e}", def.name)))
}

/// A name and version registered already, with `stored` as its text: the same definition again is
/// no change; other content is a conflict (a version never changes once registered).
pub fn registered_again(def: &WorkflowDef, stored: &str) -> Result<RegisterOutcome, StoreError> {
    // Compare parsed values, not text, so that a re-serialization is not a conflict.
    let old: Option<WorkflowDef> = serde_json::from_str(stored).ok();
    if old.as_ref() == Some(def) {
        Ok(RegisterOutcome::Unchanged)
    } else {
        Err(StoreError::Conflict(format!(
            "workflow {} version {} is already registered with other content; register it as a new version",
            def.name, def.version
        )))
    }
}
