//! Any text given to `workflows apply` as JSON: reading and validating it must answer Ok or a
//! typed error, never panic, whatever the nesting.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shiftboss_core::workflow::WorkflowDef;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(def) = WorkflowDef::from_json(text) {
        // A definition that was accepted must survive its own serialisation: the store keeps it
        // as JSON and reads it back for every decide.
        let stored = serde_json::to_string(&def).expect("a definition serialises");
        let again = WorkflowDef::from_json(&stored).expect("a stored definition reads back");
        assert_eq!(again.all_steps().len(), def.all_steps().len());
    }
});
