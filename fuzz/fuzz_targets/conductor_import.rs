//! Any Conductor WorkflowDef (or bundle), with TaskDefs given apart: the text is split at the
//! first NUL byte into the workflow and one TaskDef text, so both inputs are explored. What
//! imports is then decided once, on an empty input, so that the step kinds the importer makes
//! (set, fork_each, start_workflow, waits from the input, agents chosen at run time) are walked
//! too: a refusal is fine, a panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shiftboss_core::decider::memory::MemoryTask;
use shiftboss_core::time::Timestamp;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_conductor::from_conductor_with_tasks;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (workflow, tasks) = text.split_once('\0').unwrap_or((text, ""));
    let task_defs: Vec<&str> = if tasks.is_empty() { vec![] } else { vec![tasks] };
    if let Ok(import) = from_conductor_with_tasks(workflow, &task_defs) {
        // What an import produces is registered as our own definition: it must be valid as one.
        let stored = serde_json::to_string(&import.workflow).expect("an imported definition serialises");
        WorkflowDef::from_json(&stored).expect("an imported definition is a valid definition");
        let mut task = MemoryTask::new(import.workflow, serde_json::json!({}), Timestamp(1_700_000_000_000));
        let _ = task.decide();
    }
});
