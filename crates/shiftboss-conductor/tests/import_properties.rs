//! Conductor documents come from users' files: whatever the text, the importer gives a valid
//! definition or an error, never a panic. (The `conductor_import` fuzz target covers the same
//! reader with coverage guidance.)

use proptest::prelude::*;
use serde_json::Value;
use shiftboss_conductor::{from_conductor, from_conductor_with_tasks};

/// JSON values built from Conductor's words, so that generated documents get past the first field
/// more often than random text would.
fn json_value() -> impl Strategy<Value = Value> {
    let words = prop::sample::select(vec![
        "name",
        "version",
        "tasks",
        "type",
        "taskReferenceName",
        "SIMPLE",
        "SWITCH",
        "DECISION",
        "FORK_JOIN",
        "JOIN",
        "DO_WHILE",
        "SUB_WORKFLOW",
        "WAIT",
        "TERMINATE",
        "HTTP",
        "inputParameters",
        "outputParameters",
        "evaluatorType",
        "value-param",
        "javascript",
        "expression",
        "decisionCases",
        "defaultCase",
        "loopCondition",
        "loopOver",
        "forkTasks",
        "joinOn",
        "workflowDef",
        "taskDefs",
        "retryCount",
        "timeoutSeconds",
        "${workflow.input.x}",
        "${a.output.b",
        "$.a['iteration'] < 3",
        "10s",
        "a",
        "b",
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_text_imports_or_is_refused(text in ".{0,300}") {
        if let Ok(import) = from_conductor(&text) {
            import.workflow.validate().expect("an import is valid");
        }
    }

    #[test]
    fn any_json_document_imports_or_is_refused(doc in json_value(), defs in prop::collection::vec(json_value(), 0..2)) {
        let text = doc.to_string();
        if let Ok(import) = from_conductor(&text) {
            import.workflow.validate().expect("an import is valid");
        }
        let defs: Vec<String> = defs.iter().map(Value::to_string).collect();
        let refs: Vec<&str> = defs.iter().map(String::as_str).collect();
        if let Ok(import) = from_conductor_with_tasks(&text, &refs) {
            import.workflow.validate().expect("an import with TaskDefs is valid");
        }
    }
}

#[test]
fn deeply_nested_documents_are_refused_without_exhausting_the_stack() {
    for depth in [200, 10_000] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(from_conductor(&nested).is_err());
        let nested_object = format!("{}1{}", "{\"tasks\":".repeat(depth), "}".repeat(depth));
        assert!(from_conductor(&nested_object).is_err());
    }
}
