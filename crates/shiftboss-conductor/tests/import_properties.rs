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
        "INLINE",
        "LAMBDA",
        "JSON_JQ_TRANSFORM",
        "graaljs",
        "queryExpression",
        "scriptExpression",
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

/// A script-ish text: JavaScript and jq pieces, references, and now and then a `${`.
fn script() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "$.a",
        "$['b']",
        "$.loop['iteration']",
        "$.body.x",
        " < 3",
        " === 'a'",
        " ? 'a' : 'b'",
        "return ",
        ";",
        "(function(){",
        "})()",
        "if (",
        ") { true; } else { false; }",
        ".x | map(.)",
        "${workflow.input.a}",
        "$${",
        "\n",
    ]);
    prop::collection::vec(prop_oneof![piece.prop_map(str::to_owned), ".{0,6}"], 0..8).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The scripted tasks' paths (as the `conductor_scripts` fuzz target, on stable): whatever the
    /// scripts, evaluator and names, an import is valid and every script is an agent's static config.
    #[test]
    fn scripted_tasks_import_or_are_refused(
        inline in script(), lambda in script(), filter in script(), switch in script(), condition in script(),
        evaluator in prop::sample::select(vec!["javascript", "graaljs", "value-param", "jq", ""]),
        reference in prop::sample::select(vec!["loop", "my-loop", "loop_condition", "x", "9lives"]),
    ) {
        let def = serde_json::json!({
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
                 "decisionCases": {"a": [{"name": "w", "taskReferenceName": "loop_condition2", "type": "SIMPLE"}]}},
                {"name": "d", "taskReferenceName": reference, "type": "DO_WHILE", "loopCondition": condition,
                 "inputParameters": {"limit": 3},
                 "loopOver": [{"name": "w", "taskReferenceName": "body", "type": "SIMPLE"}]}
            ]
        });
        if let Ok(import) = from_conductor(&def.to_string()) {
            import.workflow.validate().expect("an import is valid");
            for step in import.workflow.all_steps() {
                match step.agent.as_deref() {
                    Some("inline") => prop_assert!(step.config["script"].is_string()),
                    Some("jq") => prop_assert!(step.config["filter"].is_string()),
                    _ => {}
                }
            }
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
