//! Any `${...}` expression text: parsing, printing and evaluating against a scope with nested
//! values must never panic, and the printed form must parse back to the same expression (within the
//! length limit).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use shiftboss_core::expr::{Expr, MAX_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(expr) = Expr::parse(text) else { return };
    let printed = expr.to_string();
    // The round trip is promised within the length limit only (escapes lengthen the text).
    if printed.len() <= MAX_LEN {
        let again = Expr::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} (printed from {text:?}) fails: {e}"));
        assert_eq!(again, expr, "the printed form {printed:?} parses to another expression");
    }
    let scope = json!({
        "task": {"input": {"order_id": "A-1", "amount_cents": 2500, "items": [1, 2, 3], "tags": {"x": null}},
                 "id": "t-1", "key": "order-1"},
        "charge": {"output": {"id": "ch_1", "ok": true, "ratio": 0.5}, "state": "processed"},
        "loop": {"output": {"iteration": 3}},
    });
    let serde_json::Value::Object(scope) = scope else { unreachable!() };
    let _ = expr.eval(&scope);
    let _ = expr.eval_bool(&scope);
    let _ = expr.roots();
});
