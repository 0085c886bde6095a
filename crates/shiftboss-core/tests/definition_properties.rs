//! Definitions come from users' files: whatever the text, reading it gives a definition or an
//! error, never a panic, and a definition that reads back is valid and survives a round trip.
//! (Coverage-guided fuzz targets for the same readers are issue 7's.)

use proptest::prelude::*;
use serde_json::{Value, json};
use shiftboss_core::workflow::WorkflowDef;

/// JSON values built from the words definitions use, so that generated documents get past the
/// first field more often than random text would.
fn json_value() -> impl Strategy<Value = Value> {
    let words = prop::sample::select(vec![
        "name",
        "steps",
        "kind",
        "agent",
        "switch",
        "fork",
        "do_while",
        "wait",
        "terminate",
        "sub_workflow",
        "cases",
        "default",
        "branches",
        "body",
        "condition",
        "expression",
        "input",
        "output",
        "signal",
        "duration",
        "compensate",
        "retry",
        "timeout",
        "${task.input.x}",
        "${a.output.b",
        "1s",
        "a",
        "b",
        "version",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        words.clone().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((words.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

fn a_definition_that_reads_is_valid_and_round_trips(def: WorkflowDef) {
    def.validate().expect("what reads is valid");
    let again = WorkflowDef::from_json(&serde_json::to_string(&def).unwrap()).expect("what was written reads back");
    assert_eq!(again, def);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_text_reads_or_is_refused(text in ".{0,300}") {
        if let Ok(def) = WorkflowDef::from_text(&text) {
            a_definition_that_reads_is_valid_and_round_trips(def);
        }
    }

    #[test]
    fn any_json_document_reads_or_is_refused(doc in json_value()) {
        let text = doc.to_string();
        if let Ok(def) = WorkflowDef::from_json(&text) {
            a_definition_that_reads_is_valid_and_round_trips(def);
        }
        let _ = WorkflowDef::from_yaml(&text);
    }

    #[test]
    fn any_steps_list_reads_or_is_refused(steps in prop::collection::vec(json_value(), 1..4)) {
        let text = json!({"name": "p", "steps": steps}).to_string();
        if let Ok(def) = WorkflowDef::from_json(&text) {
            a_definition_that_reads_is_valid_and_round_trips(def);
        }
    }
}

#[test]
fn deeply_nested_documents_are_refused_without_exhausting_the_stack() {
    for depth in [200, 10_000] {
        let nested_json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(WorkflowDef::from_json(&nested_json).is_err());
        let nested_yaml = format!("{}x", "- ".repeat(depth));
        assert!(WorkflowDef::from_yaml(&nested_yaml).is_err());
        // Control steps nested deeper than the limit: refused by validation, not by a crash.
        let mut step = json!({"name": "leaf", "agent": "a"});
        for i in 0..depth.min(300) {
            step = json!({"name": format!("f{i}"), "kind": "fork", "branches": [[step]]});
        }
        let def = json!({"name": "deep", "steps": [step]}).to_string();
        let err = WorkflowDef::from_json(&def).unwrap_err();
        assert!(err.problem.contains("nest") || err.problem.contains("recursion"), "{err}");
    }
}
