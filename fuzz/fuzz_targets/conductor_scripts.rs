//! The importer's paths for scripted tasks: INLINE (its evaluator too), LAMBDA, JSON_JQ_TRANSFORM,
//! a JavaScript SWITCH and a JavaScript loopCondition, in a Conductor definition whose scripts,
//! evaluator and reference names come from the input (split at NUL bytes), so that every input
//! reaches those paths rather than stopping at the JSON reader.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use shiftboss_conductor::{INLINE_AGENT, JQ_AGENT, from_conductor};
use shiftboss_core::workflow::WorkflowDef;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.split('\0');
    let mut next = |default: &str| parts.next().unwrap_or(default).to_owned();
    let (inline, evaluator, lambda, filter) = (next("$.a"), next("javascript"), next("return 1;"), next("."));
    let (switch, condition, reference) = (next("$.x"), next("false"), next("loop"));
    let def = json!({
        "name": "fuzzed",
        "tasks": [
            {"name": "i", "taskReferenceName": "inline_task", "type": "INLINE",
             "inputParameters": {"evaluatorType": evaluator, "expression": inline, "a": "${workflow.input.a}"}},
            {"name": "l", "taskReferenceName": "lambda_task", "type": "LAMBDA",
             "inputParameters": {"scriptExpression": lambda, "v": "${inline_task.output.result}"}},
            {"name": "q", "taskReferenceName": "jq_task", "type": "JSON_JQ_TRANSFORM",
             "inputParameters": {"queryExpression": filter, "v": "${lambda_task.output.result}"}},
            {"name": "s", "taskReferenceName": "switch_task", "type": "SWITCH", "evaluatorType": "javascript",
             "expression": switch, "inputParameters": {"x": "${jq_task.output.result}"},
             "decisionCases": {"a": [{"name": "w", "taskReferenceName": "worker_a", "type": "SIMPLE"}]}},
            {"name": "d", "taskReferenceName": reference, "type": "DO_WHILE", "loopCondition": condition,
             "inputParameters": {"limit": 3},
             "loopOver": [{"name": "w", "taskReferenceName": "body_task", "type": "SIMPLE"}]}
        ]
    });
    if let Ok(import) = from_conductor(&def.to_string()) {
        // What an import produces is registered as our own definition: it must be valid as one.
        let stored = serde_json::to_string(&import.workflow).expect("an imported definition serialises");
        WorkflowDef::from_json(&stored).expect("an imported definition is a valid definition");
        for step in import.workflow.all_steps() {
            // Every script lands in a step of the agents that run scripts, as its static config.
            if let Some(agent) = step.agent.as_deref().filter(|a| *a == INLINE_AGENT || *a == JQ_AGENT) {
                let key = if agent == JQ_AGENT { "filter" } else { "script" };
                assert!(step.config.get(key).is_some_and(|s| s.is_string()), "{step:?}");
            }
        }
    }
});
