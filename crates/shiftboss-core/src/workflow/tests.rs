//! Tests of our own definition format, in JSON and YAML: every kind reads, every rule names its
//! place, and what is written reads back the same.

use super::*;
use crate::retry::RetryPolicy;
use serde_json::{Value, json};

/// Every kind of step, and every policy of the workflow.
const EVERYTHING_JSON: &str = r#"{
    "name": "everything", "version": 3, "description": "every kind of step",
    "retry": {"kind": "intervals", "intervals": ["1s", "5s"], "max_failures": 2},
    "timeout": "1h",
    "compensate_on_failure": false,
    "compensate_on_cancel": true,
    "output": {"id": "${charge.output.id}", "passes": "${poll.output.iteration}"},
    "steps": [
        {"name": "charge", "agent": "payments", "config": {"url": "/charge"},
         "input": {"order": "${task.input.order}", "note": "order ${task.input.order}"},
         "timeout": "10s", "response_timeout": "5s", "on_timeout": "fail_task",
         "retry": {"kind": "exponential", "base": "1s", "cap": "1m", "jitter": 0.5, "max_failures": 5},
         "priority": 2, "domain": "eu", "domain_fallback": "30s",
         "compensate": {"name": "refund", "agent": "payments", "input": {"id": "${charge.output.id}"}}},
        {"name": "route", "kind": "switch", "expression": "${charge.output.country}",
         "cases": {"NL": [{"name": "post_nl", "agent": "ship"}], "DE": []},
         "default": [{"name": "ups", "agent": "ship"}]},
        {"name": "both", "kind": "fork",
         "branches": [[{"name": "left", "agent": "work"}], [{"name": "right", "agent": "work"}]]},
        {"name": "poll", "kind": "do_while", "condition": "${poll.output.iteration < 3}", "max_iterations": 5,
         "body": [{"name": "check", "agent": "work", "on_timeout": "alert_only"}]},
        {"name": "child", "kind": "sub_workflow", "workflow": "payment", "workflow_version": 2,
         "input": {"amount": "${task.input.amount}"}},
        {"name": "pause", "kind": "wait", "duration": "1m 30s"},
        {"name": "deadline", "kind": "wait", "until": "${task.input.deadline}"},
        {"name": "approval", "kind": "wait", "signal": "approve"},
        {"name": "stop", "kind": "terminate", "status": "failed", "output": {"why": "${approval.output.reason}"}}
    ]
}"#;

const EVERYTHING_YAML: &str = r#"
name: everything
version: 3
description: every kind of step
retry:
  kind: intervals
  intervals: [1s, 5s]
  max_failures: 2
timeout: 1h
compensate_on_failure: false
compensate_on_cancel: true
output:
  id: ${charge.output.id}
  passes: ${poll.output.iteration}
steps:
  - name: charge
    agent: payments
    config: {url: /charge}
    input:
      order: ${task.input.order}
      note: order ${task.input.order}
    timeout: 10s
    response_timeout: 5s
    on_timeout: fail_task
    retry: {kind: exponential, base: 1s, cap: 1m, jitter: 0.5, max_failures: 5}
    priority: 2
    domain: eu
    domain_fallback: 30s
    compensate:
      name: refund
      agent: payments
      input: {id: "${charge.output.id}"}
  - name: route
    kind: switch
    expression: ${charge.output.country}
    cases:
      NL:
        - {name: post_nl, agent: ship}
      DE: []
    default:
      - {name: ups, agent: ship}
  - name: both
    kind: fork
    branches:
      - - {name: left, agent: work}
      - - {name: right, agent: work}
  - name: poll
    kind: do_while
    condition: ${poll.output.iteration < 3}
    max_iterations: 5
    body:
      - {name: check, agent: work, on_timeout: alert_only}
  - name: child
    kind: sub_workflow
    workflow: payment
    workflow_version: 2
    input:
      amount: ${task.input.amount}
  - {name: pause, kind: wait, duration: 1m 30s}
  - {name: deadline, kind: wait, until: "${task.input.deadline}"}
  - {name: approval, kind: wait, signal: approve}
  - name: stop
    kind: terminate
    status: failed
    output:
      why: ${approval.output.reason}
"#;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A workflow of these steps, as JSON text.
fn with_steps(steps: Value) -> String {
    json!({"name": "t", "steps": steps}).to_string()
}

/// The error of a workflow of these steps.
fn refused(steps: Value) -> DefinitionError {
    match WorkflowDef::from_json(&with_steps(steps.clone())) {
        Ok(d) => panic!("accepted: {d:?} from {steps}"),
        Err(e) => e,
    }
}

fn path_of(steps: Value) -> String {
    refused(steps).path
}

#[test]
fn every_kind_reads_from_json() {
    let d = WorkflowDef::from_json(EVERYTHING_JSON).unwrap();
    assert_eq!((d.name.as_str(), d.version, d.timeout), ("everything", 3, Some(secs(3600))));
    assert_eq!((d.compensate_on_failure, d.compensate_on_cancel), (false, true));
    assert_eq!(d.retry, Some(RetryPolicy::Intervals { intervals: vec![secs(1), secs(5)], max_failures: Some(2) }));
    let kinds: Vec<StepKind> = d.steps.iter().map(|s| s.kind).collect();
    use StepKind::*;
    assert_eq!(kinds, [Agent, Switch, Fork, DoWhile, SubWorkflow, Wait, Wait, Wait, Terminate]);

    let charge = &d.steps[0];
    assert_eq!(charge.agent_name(), "payments");
    assert_eq!(charge.config, json!({"url": "/charge"}));
    assert_eq!((charge.timeout, charge.response_timeout), (Some(secs(10)), Some(secs(5))));
    assert_eq!(charge.on_timeout, OnTimeout::FailTask);
    assert!(matches!(charge.retry, Some(RetryPolicy::Exponential { factor, max_failures: 5, .. }) if factor == 2.0));
    assert_eq!((charge.priority, charge.domain.as_deref(), charge.domain_fallback), (2, Some("eu"), Some(secs(30))));
    assert_eq!(charge.compensate.as_ref().unwrap().name, "refund");

    let route = &d.steps[1];
    assert_eq!(route.expression.as_deref(), Some("${charge.output.country}"));
    assert_eq!(route.cases.keys().collect::<Vec<_>>(), ["DE", "NL"]);
    assert!(route.cases["DE"].is_empty(), "an empty case is allowed: nothing to do");
    assert_eq!(route.default[0].name, "ups");
    assert_eq!(d.steps[2].branches.len(), 2);
    assert_eq!((d.steps[3].max_iterations, d.steps[3].body[0].on_timeout), (Some(5), OnTimeout::AlertOnly));
    assert_eq!((d.steps[4].workflow.as_deref(), d.steps[4].workflow_version), (Some("payment"), Some(2)));
    assert_eq!(d.steps[5].duration, Some(secs(90)));
    assert_eq!(d.steps[6].until.as_deref(), Some("${task.input.deadline}"));
    assert_eq!(d.steps[7].signal.as_deref(), Some("approve"));
    assert_eq!(d.steps[8].status, Some(EndStatus::Failed));
    assert_eq!(d.all_steps().len(), 15, "nested steps and the compensation count");
}

#[test]
fn json_and_yaml_of_one_definition_are_equal() {
    let from_json = WorkflowDef::from_json(EVERYTHING_JSON).unwrap();
    let from_yaml = WorkflowDef::from_yaml(EVERYTHING_YAML).unwrap();
    assert_eq!(from_json, from_yaml);
    assert_eq!(WorkflowDef::from_text(EVERYTHING_YAML).unwrap(), from_json, "sniffed as YAML");
    assert_eq!(WorkflowDef::from_text(EVERYTHING_JSON).unwrap(), from_json, "sniffed as JSON");
}

#[test]
fn what_is_written_reads_back_equal() {
    let d = WorkflowDef::from_json(EVERYTHING_JSON).unwrap();
    let json = serde_json::to_string_pretty(&d).unwrap();
    assert_eq!(WorkflowDef::from_json(&json).unwrap(), d, "{json}");
    let yaml = serde_yaml_ng::to_string(&d).unwrap();
    assert_eq!(WorkflowDef::from_yaml(&yaml).unwrap(), d, "{yaml}");
    // Defaults are left out when written.
    let small = WorkflowDef::new("s", 1, vec![StepDef::agent("a", "http")]);
    assert_eq!(
        serde_json::to_value(&small).unwrap(),
        json!({"name": "s", "version": 1, "steps": [{"name": "a", "agent": "http"}]})
    );
    assert_eq!(WorkflowDef::from_json(&serde_json::to_string(&small).unwrap()).unwrap(), small);
}

#[test]
fn misplaced_fields_are_refused_where_they_are() {
    let cases = [
        (json!({"name": "a", "agent": "x", "cases": {"1": []}}), "steps[0].cases"),
        (json!({"name": "a", "agent": "x", "body": [{"name": "b", "agent": "x"}]}), "steps[0].body"),
        (json!({"name": "a", "agent": "x", "signal": "go"}), "steps[0].duration"),
        (json!({"name": "s", "kind": "switch", "expression": "1", "cases": {"1": []}, "agent": "x"}), "steps[0].agent"),
        (
            json!({"name": "f", "kind": "fork", "branches": [[{"name": "a", "agent": "x"}]], "timeout": "1s"}),
            "steps[0].timeout",
        ),
        (
            json!({"name": "l", "kind": "do_while", "condition": "false", "body": [{"name": "a", "agent": "x"}],
                "expression": "1"}),
            "steps[0].expression",
        ),
        (
            json!({"name": "c", "kind": "sub_workflow", "workflow": "w", "retry": {"kind": "intervals", "intervals": ["1s"]}}),
            "steps[0].retry",
        ),
        (json!({"name": "w", "kind": "wait", "duration": "1s", "input": {}}), "steps[0].input"),
        (json!({"name": "e", "kind": "terminate", "max_iterations": 3}), "steps[0].max_iterations"),
        (json!({"name": "w", "kind": "wait", "duration": "1s", "status": "failed"}), "steps[0].status"),
        (json!({"name": "s", "kind": "set", "status": "failed"}), "steps[0].status"),
        (
            json!({"name": "s", "kind": "switch", "expression": "1", "cases": {"1": []}, "delay": "1s"}),
            "steps[0].delay",
        ),
        (json!({"name": "a", "agent": "x", "variables": {}}), "steps[0].variables"),
        (json!({"name": "a", "agent": "x", "reason": "r"}), "steps[0].reason"),
        (json!({"name": "t", "kind": "terminate", "permissive": true}), "steps[0].permissive"),
    ];
    for (step, path) in cases {
        let e = refused(json!([step]));
        assert_eq!(e.path, path, "{step}: {e}");
    }
    let nested = json!([{"name": "f", "kind": "fork", "branches": [[{"name": "a", "agent": "x"}],
                          [{"name": "b", "agent": "x", "condition": "true"}]]}]);
    assert_eq!(path_of(nested), "steps[0].branches[1][0].condition");
}

#[test]
fn each_kind_names_what_it_lacks() {
    let a = json!({"name": "a", "agent": "x"});
    let cases = [
        (json!({"name": "a"}), "steps[0].agent"),
        (json!({"name": "a", "agent": "x", "timeout": "8d"}), "steps[0].timeout"),
        (json!({"name": "a", "agent": "x", "timeout": "5s", "response_timeout": "6s"}), "steps[0].response_timeout"),
        (json!({"name": "a", "agent": "x", "domain_fallback": "1s"}), "steps[0].domain_fallback"),
        (json!({"name": "a", "agent": "x", "claim_timeout": "0s"}), "steps[0].claim_timeout"),
        (json!({"name": "a", "agent": "x", "total_timeout": "0s"}), "steps[0].total_timeout"),
        (json!({"name": "a", "agent": "x", "total_timeout": "400d"}), "steps[0].total_timeout"),
        (json!({"name": "w", "kind": "wait", "signal": "go", "claim_timeout": "1s"}), "steps[0].claim_timeout"),
        (json!({"name": "s", "kind": "switch", "cases": {"1": []}}), "steps[0].expression"),
        (json!({"name": "s", "kind": "switch", "expression": "${task.input.x}"}), "steps[0].cases"),
        (json!({"name": "s", "kind": "switch", "expression": "1", "default": [a.clone()]}), "steps[0].cases"),
        (json!({"name": "f", "kind": "fork"}), "steps[0].branches"),
        (json!({"name": "f", "kind": "fork", "branches": [[a.clone()], []]}), "steps[0].branches[1]"),
        (json!({"name": "l", "kind": "do_while", "body": [a.clone()]}), "steps[0].condition"),
        (json!({"name": "l", "kind": "do_while", "condition": "false"}), "steps[0].body"),
        (
            json!({"name": "l", "kind": "do_while", "condition": "false", "body": [a.clone()], "max_iterations": 0}),
            "steps[0].max_iterations",
        ),
        (
            json!({"name": "l", "kind": "do_while", "condition": "false", "body": [a.clone()], "max_iterations": 10001}),
            "steps[0].max_iterations",
        ),
        (json!({"name": "c", "kind": "sub_workflow"}), "steps[0].workflow"),
        (json!({"name": "c", "kind": "sub_workflow", "workflow": "bad name"}), "steps[0].workflow"),
        (
            json!({"name": "c", "kind": "sub_workflow", "workflow": "w", "workflow_version": 0}),
            "steps[0].workflow_version",
        ),
        (json!({"name": "w", "kind": "wait"}), "steps[0]"),
        (json!({"name": "w", "kind": "wait", "duration": "1s", "signal": "go"}), "steps[0]"),
        (json!({"name": "w", "kind": "wait", "until": "${task.input.t}", "signal": "go"}), "steps[0]"),
        (json!({"name": "w", "kind": "wait", "duration": "1s", "until": "2030-01-01T00:00:00Z"}), "steps[0]"),
        (json!({"name": "w", "kind": "wait", "duration": 0}), "steps[0].duration"),
        (json!({"name": "w", "kind": "wait", "signal": "go now"}), "steps[0].signal"),
    ];
    for (step, path) in cases {
        let e = refused(json!([step]));
        assert_eq!(e.path, path, "{step}: {e}");
    }
    assert!(
        refused(json!([{"name": "w", "kind": "wait", "duration": "1s", "signal": "go"}]))
            .problem
            .contains("exactly one")
    );
}

#[test]
fn expression_errors_name_their_field() {
    let cases = [
        (json!({"name": "a", "agent": "x", "input": {"v": "${task.input.}"}}), "steps[0].input"),
        (json!({"name": "s", "kind": "switch", "expression": "${1 +}", "cases": {"1": []}}), "steps[0].expression"),
        (
            json!({"name": "l", "kind": "do_while", "condition": "a ==", "body": [{"name": "a", "agent": "x"}]}),
            "steps[0].condition",
        ),
        (json!({"name": "c", "kind": "sub_workflow", "workflow": "w", "input": "${(}"}), "steps[0].input"),
        (json!({"name": "w", "kind": "wait", "until": "${task.input"}), "steps[0].until"),
        (json!({"name": "e", "kind": "terminate", "output": ["${'open}"]}), "steps[0].output"),
    ];
    for (step, path) in cases {
        let e = refused(json!([step]));
        assert_eq!(e.path, path, "{step}: {e}");
    }
    let bad_output = json!({"name": "t", "output": "${}", "steps": [{"name": "a", "agent": "x"}]});
    assert_eq!(WorkflowDef::from_json(&bad_output.to_string()).unwrap_err().path, "output");
}

#[test]
fn expressions_reading_an_unknown_step_name_their_place() {
    let e = refused(json!([{"name": "a", "agent": "x", "input": {"v": "${charge.output.id}"}}]));
    assert_eq!(e.path, "step \"a\".input");
    assert!(e.problem.contains("\"charge\""), "{e}");
    let e = refused(json!([{"name": "s", "kind": "switch", "expression": "${chek.output.ok}", "cases": {"true": []}},
                           {"name": "check", "agent": "x"}]));
    assert_eq!(e.path, "step \"s\".expression");
    let e = refused(json!([{"name": "l", "kind": "do_while", "condition": "${l.output.iteration < n}",
                            "body": [{"name": "a", "agent": "x"}]}]));
    assert_eq!(e.path, "step \"l\".condition");
    let def = json!({"name": "t", "output": {"x": "${nobody.output}"}, "steps": [{"name": "a", "agent": "x"}]});
    assert_eq!(WorkflowDef::from_json(&def.to_string()).unwrap_err().path, "output");
    // A step later in the workflow, or nested anywhere, is known.
    let ok = json!([{"name": "a", "agent": "x", "input": "${b.output}"},
                    {"name": "f", "kind": "fork", "branches": [[{"name": "b", "agent": "x"}]]}]);
    assert!(WorkflowDef::from_json(&with_steps(ok)).is_ok());
}

#[test]
fn names_are_unique_across_nesting_and_compensations() {
    let a = |n: &str| json!({"name": n, "agent": "x"});
    let e = refused(json!([a("a"), {"name": "f", "kind": "fork", "branches": [[a("b")], [a("a")]]}]));
    assert_eq!(e.path, "steps[1].branches[1][0].name");
    let e = refused(json!([{"name": "l", "kind": "do_while", "condition": "false",
                            "body": [{"name": "s", "kind": "switch", "expression": "1", "cases": {"1": [a("l")]}}]}]));
    assert_eq!(e.path, "steps[0].body[0].cases.1[0].name");
    let e = refused(json!([{"name": "a", "agent": "x", "compensate": a("undo")}, a("undo")]));
    assert_eq!(e.path, "steps[1].name");
    let e = refused(json!([{"name": "a", "agent": "x", "compensate": a("a")}]));
    assert_eq!(e.path, "steps[0].compensate.name");
    assert_eq!(path_of(json!([a("bad name")])), "steps[0].name");
    assert_eq!(path_of(json!([a("charge#2")])), "steps[0].name", "`#` marks loop passes");
}

#[test]
fn a_compensation_is_a_plain_agent_step() {
    let e =
        refused(json!([{"name": "a", "agent": "x", "compensate": {"name": "u", "kind": "wait", "duration": "1s"}}]));
    assert_eq!(e.path, "steps[0].compensate.kind");
    let e = refused(json!([{"name": "a", "agent": "x",
                            "compensate": {"name": "u", "agent": "x", "compensate": {"name": "v", "agent": "x"}}}]));
    assert_eq!(e.path, "steps[0].compensate.compensate");
    let e =
        refused(json!([{"name": "a", "agent": "x", "compensate": {"name": "u", "agent": "x", "cases": {"1": []}}}]));
    assert_eq!(e.path, "steps[0].compensate.cases");
    let e = refused(json!([{"name": "a", "agent": "x", "compensate": {"name": "u"}}]));
    assert_eq!(e.path, "steps[0].compensate.agent");
    let e = refused(json!([{"name": "s", "kind": "switch", "expression": "1", "cases": {"1": []},
                            "compensate": {"name": "u", "agent": "x"}}]));
    assert_eq!(e.path, "steps[0].compensate", "only agent steps are compensated");
}

#[test]
fn unknown_fields_are_named() {
    let e = WorkflowDef::from_json(&with_steps(json!([{"name": "a", "agnet": "x"}]))).unwrap_err();
    assert_eq!(e.path, "steps[0].agnet");
    assert!(e.problem.contains("unknown field"), "{e}");
    let e = WorkflowDef::from_yaml("name: t\nsteps:\n  - name: a\n    agent: x\n    retyr: {}\n").unwrap_err();
    assert_eq!(e.path, "steps[0].retyr");
    let e = WorkflowDef::from_yaml("name: t\ntimout: 1s\nsteps: [{name: a, agent: x}]\n").unwrap_err();
    assert_eq!(e.path, "timout");
    let nested = json!([{"name": "f", "kind": "fork", "branches": [[{"name": "a", "agent": "x", "confg": {}}]]}]);
    assert_eq!(WorkflowDef::from_json(&with_steps(nested)).unwrap_err().path, "steps[0].branches[0][0].confg");
    let e = WorkflowDef::from_json(&with_steps(json!([{"name": "a", "kind": "loop"}]))).unwrap_err();
    assert_eq!(e.path, "steps[0].kind", "an unknown kind: {e}");
    let e = WorkflowDef::from_json(&with_steps(json!([{"name": "a", "agent": "x", "timeout": "soon"}]))).unwrap_err();
    assert_eq!(e.path, "steps[0].timeout", "{e}");
}

#[test]
fn syntax_errors_name_line_and_column() {
    let e = WorkflowDef::from_yaml("name: t\nsteps:\n  - name: a\n   agent: x\n").unwrap_err();
    assert!(e.path.starts_with("line 4 column"), "{e}");
    let e = WorkflowDef::from_yaml("name: t\nsteps: [{name: a, agent: x}\n").unwrap_err();
    assert!(e.path.starts_with("line "), "{e}");
    let e = WorkflowDef::from_json("{\"name\": \"t\",\n \"steps\": [,]}").unwrap_err();
    assert_eq!(e.path, "line 2 column 12");
}

#[test]
fn workflow_level_rules_name_their_field() {
    let one = json!([{"name": "a", "agent": "x"}]);
    let def = |extra: Value| {
        let mut d = json!({"name": "t", "steps": one});
        d.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        WorkflowDef::from_json(&d.to_string())
    };
    assert_eq!(def(json!({"version": 0})).unwrap_err().path, "version");
    assert_eq!(def(json!({"timeout": "400d"})).unwrap_err().path, "timeout");
    assert_eq!(def(json!({"retry": {"kind": "intervals", "intervals": []}})).unwrap_err().path, "retry");
    assert_eq!(def(json!({"name": ""})).unwrap_err().path, "name");
    assert_eq!(def(json!({"steps": []})).unwrap_err().path, "steps");
    assert!(def(json!({"description": "fine"})).is_ok());
}

#[test]
fn an_empty_document_says_so() {
    for text in ["", "   \n", "# only a comment\n", "---\n"] {
        let e = WorkflowDef::from_text(text).unwrap_err();
        assert_eq!((e.path.as_str(), e.problem.as_str()), ("document", "empty: it holds no definition"), "{text:?}");
    }
}
