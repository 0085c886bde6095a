//! Any text given to `workflows apply` as YAML (anchors, aliases and deep nesting included).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shiftboss_core::workflow::WorkflowDef;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(def) = WorkflowDef::from_yaml(text) {
        let stored = serde_json::to_string(&def).expect("a definition serialises");
        WorkflowDef::from_json(&stored).expect("a definition read from YAML reads back from its JSON");
    }
});
