//! Any JSON value used as a step's `input` or a workflow's `output`: every string in it may hold
//! `${...}`; parsing and rendering must never panic and stay within the size bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use shiftboss_core::expr::{MAX_STRING, Template};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let Ok(template) = Template::parse(&value) else { return };
    let _ = template.roots();
    let scope = json!({
        "task": {"input": {"order_id": "A-1", "amount_cents": 2500, "note": "x".repeat(64)}},
        "charge": {"output": {"id": "ch_1", "items": [1, 2, 3]}},
    });
    let Value::Object(scope) = scope else { unreachable!() };
    if let Ok(Value::String(s)) = template.render(&scope) {
        // Bounded memory: an interpolated string cannot outgrow the evaluator's limit by much
        // more than the literal text around it.
        assert!(s.len() <= MAX_STRING + data.len(), "a rendered string of {} bytes", s.len());
    }
});
