//! The step kinds and options that carry Conductor's wider vocabulary: set steps and task
//! variables, optional and permissive steps, a terminate's reason, an agent and a workflow chosen
//! at run time, start_workflow steps, input defaults.

use super::memory::MemoryTask;
use super::*;
use crate::workflow::{EndStatus, StepDef, WorkflowDef};
use serde_json::json;

fn task(def: WorkflowDef, input: Value) -> MemoryTask {
    def.validate().expect("the test's definition is valid");
    MemoryTask::new(def, input, Timestamp(1_000_000))
}

#[test]
fn set_steps_set_variables_that_later_steps_read_in_order() {
    let mut def = WorkflowDef::new(
        "vars",
        1,
        vec![
            StepDef::set("first", Some(json!({"who": "${task.input.name}", "n": 1})), None),
            StepDef::agent("greet", "mail")
                .with_input(json!({"to": "${task.variables.who}", "n": "${task.variables.n}"})),
            StepDef::set(
                "second",
                Some(json!({"n": "${task.variables.n + 1}"})),
                Some(json!({"was": "${task.variables.n}"})),
            ),
            StepDef::agent("count", "mail")
                .with_input(json!({"n": "${task.variables.n}", "kept": "${task.variables.start}"})),
        ],
    );
    def.variables = Some(json!({"start": "yes", "n": 0}));
    let mut t = task(def, json!({"name": "ann"}));
    assert_eq!(t.decide().unwrap(), TaskMove::Stay);
    assert_eq!(t.row("first").unwrap().state, StepState::Processed);
    assert_eq!(t.row("greet").unwrap().input, json!({"to": "ann", "n": 1}));
    t.finish("greet", json!({})).unwrap();
    assert_eq!(t.row("second").unwrap().output, Some(json!({"was": 1})), "its output reads the value before it");
    assert_eq!(t.row("count").unwrap().input, json!({"n": 2, "kept": "yes"}), "initial values stay until set");
    let end = t.finish("count", json!({"sent": true})).unwrap();
    assert_eq!(end, TaskMove::Complete { output: json!({"sent": true}) });
}

#[test]
fn an_optional_step_that_fails_lets_the_task_go_on() {
    let mut charge = StepDef::agent("charge", "pay");
    charge.optional = true;
    let def = WorkflowDef::new("opt", 1, vec![charge, StepDef::agent("ship", "post")]);
    let mut t = task(def.clone(), json!({}));
    t.decide().unwrap();
    assert_eq!(t.fail("charge", "card refused").unwrap(), TaskMove::Stay);
    assert_eq!(t.row("charge").unwrap().state, StepState::Error, "the row keeps the failure for people to see");
    assert_eq!(t.pending(), ["ship"]);
    assert_eq!(t.finish("ship", json!({"ok": 1})).unwrap(), TaskMove::Complete { output: json!({"ok": 1}) });

    // Without the option the same failure fails the task.
    let mut plain = def;
    plain.steps[0].optional = false;
    let mut t = task(plain, json!({}));
    t.decide().unwrap();
    assert!(matches!(t.fail("charge", "card refused").unwrap(), TaskMove::Fail { .. }));
}

#[test]
fn a_permissive_step_that_fails_lets_the_rest_run_then_fails_the_task() {
    let mut check = StepDef::agent("check", "audit");
    check.permissive = true;
    let def = WorkflowDef::new("perm", 1, vec![check, StepDef::agent("ship", "post")]);
    let mut t = task(def, json!({}));
    t.decide().unwrap();
    assert_eq!(t.fail("check", "audit down").unwrap(), TaskMove::Stay);
    assert_eq!(t.pending(), ["ship"], "the steps after it still run");
    let end = t.finish("ship", json!({})).unwrap();
    assert_eq!(end, TaskMove::Fail { step: "check".into(), reason: "audit down".into() });
}

#[test]
fn a_permissive_step_in_a_fork_fails_the_join_once_every_branch_has_ended() {
    let mut check = StepDef::agent("check", "audit");
    check.permissive = true;
    let fork = StepDef::fork("both", vec![vec![check], vec![StepDef::agent("pack", "store")]]);
    let def = WorkflowDef::new("perm_fork", 1, vec![fork, StepDef::agent("ship", "post")]);
    let mut t = task(def, json!({}));
    t.decide().unwrap();
    assert_eq!(t.fail("check", "audit down").unwrap(), TaskMove::Stay, "the other branch goes on");
    let end = t.finish("pack", json!({})).unwrap();
    assert_eq!(end, TaskMove::Fail { step: "check".into(), reason: "audit down".into() });
    assert_eq!(t.row("both").unwrap().state, StepState::Error);
    assert!(t.row("ship").is_none(), "nothing after the join runs");
}

#[test]
fn a_terminate_gives_its_reason_as_the_failure() {
    let mut stop = StepDef::terminate("stop", EndStatus::Failed, json!({"at": "${task.input.at}"}));
    stop.reason = Some("order ${task.input.at} is blocked".into());
    let def = WorkflowDef::new("term", 1, vec![stop]);
    let mut t = task(def, json!({"at": "A1"}));
    let end = t.decide().unwrap();
    assert_eq!(end, TaskMove::Fail { step: "stop".into(), reason: "order A1 is blocked".into() });
    assert_eq!(t.row("stop").unwrap().output.as_ref().unwrap()["reason"], json!("order A1 is blocked"));
}

#[test]
fn an_agent_chosen_at_run_time_is_the_expression_s_value_and_must_be_a_name() {
    let step = StepDef::agent("ship", "${task.input.carrier}");
    let def = WorkflowDef::new("dyn", 1, vec![step]);
    def.validate().unwrap();
    let view = |input: &'static Value| TaskView {
        id: 1,
        key: "k",
        state: crate::state::TaskState::Running,
        input,
        now: Timestamp(0),
        correlation_id: None,
    };
    static GOOD: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({"carrier": "fedex"}));
    let d = decide(&def, &view(&GOOD), &[]);
    let Action::Create(n) = &d.actions[0] else { panic!("{d:?}") };
    assert_eq!(n.agent.as_deref(), Some("fedex"));

    static BAD: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({"carrier": "no such/agent"}));
    let d = decide(&def, &view(&BAD), &[]);
    let TaskMove::Fail { reason, .. } = &d.task else { panic!("{d:?}") };
    assert!(reason.starts_with("agent: ${task.input.carrier} gave \"no such/agent\""), "{reason}");

    let unknown = WorkflowDef::new("dyn", 1, vec![StepDef::agent("ship", "${nobody.output.x}")]);
    assert_eq!(unknown.validate().unwrap_err().path, "step \"ship\".agent");
    let half = WorkflowDef::new("dyn", 1, vec![StepDef::agent("ship", "${task.input.a}-x")]);
    assert_eq!(half.validate().unwrap_err().path, "steps[0].agent");
}

#[test]
fn a_start_workflow_step_starts_its_task_and_goes_on_at_once() {
    let start =
        StepDef::start_workflow("notify", "${task.input.flow}").with_input(json!({"order": "${task.input.id}"}));
    let def = WorkflowDef::new(
        "fire",
        1,
        vec![start, StepDef::agent("after", "a").with_input(json!({"started": "${notify.output.task_id}"}))],
    );
    let mut t = task(def, json!({"flow": "emails", "id": 7}));
    assert_eq!(t.decide().unwrap(), TaskMove::Stay);
    assert_eq!(
        t.children,
        [ChildTask { workflow: "emails".into(), version: None, input: json!({"order": 7}), detached: true }]
    );
    assert_eq!(t.row("notify").unwrap().state, StepState::Processed);
    assert_eq!(t.pending(), ["after"]);
    assert_eq!(t.row("after").unwrap().input, json!({"started": 2}));
}

#[test]
fn a_child_s_version_may_come_from_the_input() {
    let mut start = StepDef::start_workflow("notify", "emails");
    start.workflow_version_from = Some("${task.input.version}".into());
    let def = WorkflowDef::new("versioned", 1, vec![start]);
    def.validate().unwrap();
    let child = |input: Value| {
        let mut t = task(def.clone(), input);
        let moved = t.decide();
        let failed = matches!(&moved, Ok(TaskMove::Fail { reason, .. }) if reason.starts_with("workflow_version_from"));
        (t.children.first().map(|c| c.version), failed)
    };
    assert_eq!(child(json!({"version": 3})).0, Some(Some(3)));
    assert_eq!(child(json!({"version": "2"})).0, Some(Some(2)), "numeric text, as Conductor's version");
    assert_eq!(child(json!({"version": null})).0, Some(None), "null: the newest");
    assert_eq!(child(json!({})).0, Some(None), "absent: the newest");
    for bad in [json!(0), json!("two"), json!(1.5), json!([1])] {
        assert_eq!(child(json!({"version": bad})), (None, true), "{bad}: the task fails, nothing starts");
    }
    let mut both = StepDef::sub_workflow("c", "emails");
    both.workflow_version = Some(1);
    both.workflow_version_from = Some("${task.input.v}".into());
    let e = WorkflowDef::new("x", 1, vec![both]).validate().unwrap_err();
    assert_eq!(e.path, "steps[0].workflow_version_from");
}

#[test]
fn input_defaults_fill_what_the_input_lacks() {
    let mut def = WorkflowDef::new("defaults", 1, vec![StepDef::agent("a", "x")]);
    def.input_defaults = Some(json!({"currency": "EUR", "amount": 0}));
    let mut t = task(def.clone(), json!({"amount": 5}));
    t.decide().unwrap();
    assert_eq!(t.row("a").unwrap().input, json!({"currency": "EUR", "amount": 5}));
    let mut t = task(def, Value::Null);
    t.decide().unwrap();
    assert_eq!(t.row("a").unwrap().input, json!({"currency": "EUR", "amount": 0}));
}

#[test]
fn the_new_fields_are_refused_where_they_do_not_belong() {
    let mut wait = StepDef::wait_for_signal("w", "go");
    wait.optional = true;
    let e = WorkflowDef::new("x", 1, vec![wait]).validate().unwrap_err();
    assert_eq!((e.path.as_str(), e.problem.as_str()), ("steps[0].optional", "a step of kind wait has no optional"));
    let set = StepDef::set("s", Some(json!(["not", "an", "object"])), None);
    assert_eq!(WorkflowDef::new("x", 1, vec![set]).validate().unwrap_err().path, "steps[0].variables");
    let mut def = WorkflowDef::new("x", 1, vec![StepDef::agent("a", "x")]);
    def.variables = Some(json!(3));
    assert_eq!(def.validate().unwrap_err().path, "variables");
    def.variables = None;
    def.on_failure = Some("bad name".into());
    assert_eq!(def.validate().unwrap_err().path, "on_failure");
}

#[test]
fn a_wait_s_duration_from_is_read_when_it_starts() {
    let mut wait = StepDef { name: "pause".into(), kind: crate::workflow::StepKind::Wait, ..StepDef::default() };
    wait.duration_from = Some("${task.input.pause}".into());
    let def = WorkflowDef::new("w", 1, vec![wait, StepDef::agent("after", "x")]);
    for (pause, ms) in [(json!("2 minutes"), 120_000), (json!(1500), 1500)] {
        let mut t = task(def.clone(), json!({"pause": pause}));
        t.decide().unwrap();
        assert_eq!(t.waits, [("pause".to_owned(), Some(Timestamp(1_000_000 + ms)))], "{pause}");
    }
    let mut t = task(def, json!({"pause": "a while"}));
    let TaskMove::Fail { reason, .. } = t.decide().unwrap() else { panic!("a bad duration fails the task") };
    assert!(reason.starts_with("duration_from: \"a while\" is not a duration"), "{reason}");
}

#[test]
fn a_fork_that_joins_some_branches_goes_on_while_the_others_run_and_the_task_waits_for_them() {
    let mut fork = StepDef::fork(
        "both",
        vec![
            vec![StepDef::agent("charge", "pay")],
            vec![StepDef::agent("audit", "log"), StepDef::agent("archive", "log")],
        ],
    );
    fork.join_on = vec!["charge".into()];
    let def = WorkflowDef::new("some", 1, vec![fork, StepDef::agent("ship", "post")]);
    let mut t = task(def, json!({}));
    t.decide().unwrap();
    assert_eq!(t.pending(), ["charge", "audit"]);
    t.finish("charge", json!({"id": 1})).unwrap();
    assert_eq!(t.row("both").unwrap().state, StepState::Processed, "the join has what it waits for");
    assert_eq!(t.pending(), ["audit", "ship"], "the step after the join runs beside the other branch");
    assert_eq!(t.finish("ship", json!({"shipped": true})).unwrap(), TaskMove::Stay, "the other branch still runs");
    assert_eq!(t.finish("audit", json!({})).unwrap(), TaskMove::Stay);
    assert_eq!(t.pending(), ["archive"], "and goes on after the join");
    let end = t.finish("archive", json!({})).unwrap();
    assert_eq!(end, TaskMove::Complete { output: json!({"shipped": true}) });

    let mut bad = StepDef::fork("f", vec![vec![StepDef::agent("a", "x"), StepDef::agent("b", "x")]]);
    bad.join_on = vec!["a".into()];
    assert_eq!(WorkflowDef::new("x", 1, vec![bad]).validate().unwrap_err().path, "steps[0].join_on[0]");
}

fn fan_out(key: Option<&str>) -> WorkflowDef {
    let body = StepDef::agent("resize", "${fanout.item.agent}").with_input(json!({"size": "${fanout.item.size}"}));
    let each = StepDef {
        name: "fanout".into(),
        kind: crate::workflow::StepKind::ForkEach,
        items: Some(json!("${task.input.sizes}")),
        key: key.map(str::to_owned),
        body: vec![body],
        ..StepDef::default()
    };
    WorkflowDef::new("fan", 1, vec![each, StepDef::agent("after", "x").with_input(json!("${fanout.output}"))])
}

#[test]
fn a_fork_each_runs_its_body_once_per_item_side_by_side_and_joins_them_all() {
    let sizes = json!([{"agent": "small", "size": 1}, {"agent": "large", "size": 9}]);
    let mut t = task(fan_out(None), json!({"sizes": sizes}));
    t.decide().unwrap();
    assert_eq!(t.pending(), ["resize#1", "resize#2"], "every item at once");
    assert_eq!(t.row("resize#2").unwrap().input, json!({"size": 9}));
    assert_eq!(t.row("fanout").unwrap().input, sizes, "the row keeps its items");
    t.finish("resize#2", json!({"px": 900})).unwrap();
    assert_eq!(t.pending(), ["resize#1"], "the join waits for every item");
    t.finish("resize#1", json!({"px": 100})).unwrap();
    assert_eq!(t.row("after").unwrap().input, json!([{"px": 100}, {"px": 900}]), "outputs in the items' order");

    let mut t = task(fan_out(Some("${fanout.item.agent}")), json!({"sizes": sizes}));
    t.decide().unwrap();
    t.finish("resize#1", json!({"px": 100})).unwrap();
    t.finish("resize#2", json!({"px": 900})).unwrap();
    assert_eq!(t.row("after").unwrap().input, json!({"small": {"px": 100}, "large": {"px": 900}}), "keyed");
}

#[test]
fn a_fork_each_item_that_fails_fails_it_and_an_empty_list_is_done_at_once() {
    let sizes = json!([{"agent": "small", "size": 1}, {"agent": "large", "size": 9}]);
    let mut t = task(fan_out(None), json!({"sizes": sizes}));
    t.decide().unwrap();
    let end = t.fail("resize#1", "too big").unwrap();
    assert!(matches!(end, TaskMove::Fail { ref step, .. } if step == "resize#1"), "{end:?}");
    assert_eq!(t.row("fanout").unwrap().state, StepState::Error);
    assert_eq!(t.row("resize#2").unwrap().state, StepState::Cancelled, "the others' work is cancelled");

    let mut t = task(fan_out(None), json!({"sizes": []}));
    t.decide().unwrap();
    assert_eq!(t.row("after").unwrap().input, json!([]));
    let mut t = task(fan_out(None), json!({"sizes": "many"}));
    let TaskMove::Fail { reason, .. } = t.decide().unwrap() else { panic!("not a list") };
    assert!(reason.contains("not a list"), "{reason}");
}
