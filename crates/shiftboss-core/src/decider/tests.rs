//! The decider as data: a definition, what the task's steps did, and what the decider must do.
//! `Sim` plays the store: it writes each decision into its rows, as a store's transaction does.

use super::memory::MemoryTask;
use super::operator::{Plan, RowChange, plan_rerun, plan_retry, plan_skip};
use super::*;
use crate::workflow::{EndStatus, StepDef, WorkflowDef};
use serde_json::json;
use std::time::Duration;

/// The decider's tests drive a [`MemoryTask`]; a refusal there is a failed test here.
struct Sim(MemoryTask);

impl std::ops::Deref for Sim {
    type Target = MemoryTask;
    fn deref(&self) -> &MemoryTask {
        &self.0
    }
}

impl std::ops::DerefMut for Sim {
    fn deref_mut(&mut self) -> &mut MemoryTask {
        &mut self.0
    }
}

impl Sim {
    fn new(def: WorkflowDef, input: Value) -> Sim {
        def.validate().expect("the test's definition is valid");
        Sim(MemoryTask::new(def, input, Timestamp(1_000_000)))
    }

    fn decide(&mut self) -> TaskMove {
        self.0.decide().unwrap_or_else(|e| panic!("{e}; rows: {:?}", self.0.names()))
    }

    fn finish(&mut self, name: &str, output: Value) -> TaskMove {
        self.0.finish(name, output).unwrap()
    }

    fn fail(&mut self, name: &str) -> TaskMove {
        self.0.fail(name, "refused").unwrap()
    }

    fn end_control(&mut self, name: &str, output: Value) -> TaskMove {
        self.0.end_control(name, output).unwrap()
    }

    fn apply(&mut self, plan: Plan) {
        self.0.apply(plan).unwrap()
    }

    fn state_of(&self, name: &str) -> StepState {
        self.row(name).map(|r| r.state).unwrap_or_else(|| panic!("no row {name}"))
    }

    fn input_of(&self, name: &str) -> &Value {
        &self.row(name).unwrap_or_else(|| panic!("no row {name}")).input
    }

    fn row_mut(&mut self, name: &str) -> &mut StepView {
        self.0.rows.iter_mut().find(|r| r.name == name).unwrap()
    }
}

fn a(name: &str) -> StepDef {
    StepDef::agent(name, "http")
}

fn wf(steps: Vec<StepDef>) -> WorkflowDef {
    WorkflowDef::new("t", 1, steps)
}

#[test]
fn a_line_of_steps_runs_in_order_and_ends_with_the_last_output() {
    let mut s = Sim::new(wf(vec![a("reserve"), a("charge"), a("ship")]), json!({"order": 1}));
    assert_eq!(s.decide(), TaskMove::Stay);
    assert_eq!(s.pending(), ["reserve"]);
    assert_eq!(s.input_of("reserve"), &json!({"order": 1}), "without a template, the task's input");
    assert_eq!(s.decide(), TaskMove::Stay, "deciding again changes nothing");
    assert_eq!(s.rows.len(), 1);
    s.finish("reserve", json!(1));
    assert_eq!(s.pending(), ["charge"]);
    s.finish("charge", json!(2));
    assert_eq!(s.finish("ship", json!({"t": 3})), TaskMove::Complete { output: json!({"t": 3}) });
}

#[test]
fn inputs_map_the_task_and_earlier_outputs() {
    let def = wf(vec![
        a("charge").with_input(json!({"order": "${task.input.order_id}", "key": "${task.key}"})),
        a("ship").with_input(json!({"payment": "${charge.output.payment_id}", "note": "paid ${charge.output.amount}"})),
    ]);
    let mut s = Sim::new(def, json!({"order_id": "A-1"}));
    s.decide();
    assert_eq!(s.input_of("charge"), &json!({"order": "A-1", "key": "memory"}));
    s.finish("charge", json!({"payment_id": "P9", "amount": 12}));
    assert_eq!(s.input_of("ship"), &json!({"payment": "P9", "note": "paid 12"}));
}

#[test]
fn a_switch_follows_the_matching_case_or_the_default() {
    let def = |_: ()| {
        wf(vec![
            StepDef::switch("route", "${task.input.country}")
                .case("NL", vec![a("post_nl")])
                .case("DE", vec![a("dhl"), a("dhl_label")])
                .otherwise(vec![a("ups")]),
            a("notify"),
        ])
    };
    let cases: [(Value, &[&str], Value); 3] = [
        (json!({"country": "DE"}), &["dhl", "dhl_label"], json!("DE")),
        (json!({"country": "NL"}), &["post_nl"], json!("NL")),
        (json!({"country": "FR"}), &["ups"], Value::Null),
    ];
    for (input, path, case) in cases {
        let mut s = Sim::new(def(()), input);
        s.decide();
        let route = s.rows.iter().find(|r| r.name == "route").unwrap();
        assert_eq!((route.state, route.output.as_ref().unwrap()["case"].clone()), (StepState::Processed, case));
        for step in path {
            assert_eq!(s.pending(), [*step]);
            s.finish(step, json!(null));
        }
        assert_eq!(s.pending(), ["notify"], "after the case, the step after the switch");
        assert!(matches!(s.finish("notify", json!("ok")), TaskMove::Complete { .. }));
    }
}

#[test]
fn a_switch_keeps_its_choice_when_its_inputs_change_later() {
    let def = wf(vec![
        a("check"),
        StepDef::switch("route", "${check.output.ok}").case("true", vec![a("yes")]).otherwise(vec![a("no")]),
    ]);
    let mut s = Sim::new(def, json!({}));
    s.decide();
    s.finish("check", json!({"ok": true}));
    assert_eq!(s.pending(), ["yes"]);
    s.row_mut("check").output = Some(json!({"ok": false}));
    s.decide();
    assert_eq!(s.pending(), ["yes"], "the recorded case holds");
}

#[test]
fn a_fork_runs_its_branches_together_and_joins_them() {
    let def = wf(vec![StepDef::fork("both", vec![vec![a("a1"), a("a2")], vec![a("b1")]]), a("after")]);
    let mut s = Sim::new(def, json!({}));
    s.decide();
    assert_eq!(s.pending(), ["a1", "b1"]);
    assert_eq!(s.state_of("both"), StepState::Processing);
    s.finish("b1", json!("B"));
    assert_eq!(s.pending(), ["a1"], "the join waits for every branch");
    s.finish("a1", json!("A1"));
    assert_eq!(s.pending(), ["a2"]);
    s.finish("a2", json!("A2"));
    assert_eq!(s.state_of("both"), StepState::Processed);
    assert_eq!(s.rows.iter().find(|r| r.name == "both").unwrap().output, Some(json!(["A2", "B"])));
    assert_eq!(s.pending(), ["after"]);
}

#[test]
fn a_failed_branch_cancels_its_siblings_running_steps() {
    let def = wf(vec![StepDef::fork("both", vec![vec![a("a1")], vec![a("b1"), a("b2")], vec![a("c1")]])]);
    let mut s = Sim::new(def, json!({}));
    s.decide();
    s.finish("b1", json!(null));
    assert_eq!(s.pending(), ["a1", "c1", "b2"]);
    let m = s.fail("b2");
    assert_eq!(m, TaskMove::Fail { step: "b2".into(), reason: "refused".into() });
    assert_eq!((s.state_of("a1"), s.state_of("c1")), (StepState::Cancelled, StepState::Cancelled));
    assert_eq!(s.state_of("b1"), StepState::Processed, "finished work stays");
    assert_eq!(s.state_of("both"), StepState::Error);
}

fn poll_loop(max: u32) -> WorkflowDef {
    wf(vec![
        StepDef::do_while("poll", "${poll.output.iteration < 3 && check.output.ready != true}", max, vec![a("check")]),
        a("done").with_input(json!({"passes": "${poll.output.iteration}"})),
    ])
}

#[test]
fn a_loop_runs_its_body_while_the_condition_holds() {
    let mut s = Sim::new(poll_loop(10), json!({}));
    s.decide();
    assert_eq!(s.pending(), ["check#1"]);
    s.finish("check#1", json!({"ready": false}));
    assert_eq!(s.pending(), ["check#2"]);
    s.finish("check#2", json!({"ready": true}));
    assert_eq!(s.pending(), ["done"], "the condition read this pass's output");
    assert_eq!(s.input_of("done"), &json!({"passes": 2}));
    assert_eq!(s.state_of("poll"), StepState::Processed);
}

#[test]
fn a_loop_that_reaches_its_cap_fails_the_task() {
    let mut s = Sim::new(poll_loop(2), json!({}));
    s.decide();
    s.finish("check#1", json!({}));
    let m = s.finish("check#2", json!({}));
    assert!(matches!(&m, TaskMove::Fail { step, reason } if step == "poll" && reason.contains("2 passes")), "{m:?}");
    assert_eq!(s.names(), ["poll", "check#1", "check#2"]);
}

#[test]
fn a_loop_of_control_steps_only_is_stopped_by_its_cap_in_one_decide() {
    let body = vec![StepDef::switch("s", "${task.input.x}").case("1", vec![]).otherwise(vec![])];
    let def = wf(vec![StepDef::do_while("spin", "true", 50, body)]);
    let mut s = Sim::new(def, json!({"x": 1}));
    assert!(matches!(s.decide(), TaskMove::Fail { .. }));
    assert_eq!(s.rows.len(), 51, "the loop row and one switch per pass");
}

#[test]
fn loops_nest_and_each_pass_has_its_own_instances() {
    let inner = StepDef::do_while("inner", "${inner.output.iteration < 2}", 5, vec![a("work")]);
    let def = wf(vec![StepDef::do_while("outer", "${outer.output.iteration < 2}", 5, vec![inner])]);
    let mut s = Sim::new(def, json!({}));
    s.decide();
    for step in ["work#1#1", "work#1#2", "work#2#1", "work#2#2"] {
        assert_eq!(s.pending(), [step]);
        s.finish(step, json!(null));
    }
    assert_eq!(s.state, TaskState::Completed);
    assert!(s.names().contains(&"inner#2"));
}

#[test]
fn a_sub_workflow_starts_a_child_and_takes_its_output() {
    let def = wf(vec![
        StepDef::sub_workflow("pay", "payment").with_input(json!({"amount": "${task.input.amount}"})),
        a("ship").with_input("${pay.output.receipt}".into()),
    ]);
    let mut s = Sim::new(def, json!({"amount": 5}));
    assert_eq!(s.decide(), TaskMove::Stay);
    assert_eq!(
        s.children,
        [ChildTask { workflow: "payment".into(), version: None, input: json!({"amount": 5}), detached: false }]
    );
    assert_eq!(s.state_of("pay"), StepState::Processing);
    s.end_control("pay", json!({"receipt": "R1"}));
    assert_eq!(s.input_of("ship"), &json!("R1"));
}

#[test]
fn waits_end_by_time_or_by_signal() {
    let def = wf(vec![
        StepDef::wait_for("cool_off", Duration::from_secs(60)),
        StepDef::wait_for_signal("approval", "approve"),
        StepDef {
            name: "past".into(),
            kind: StepKind::Wait,
            until: Some("1970-01-01T00:00:01Z".into()),
            ..StepDef::default()
        },
        a("go").with_input("${approval.output.by}".into()),
    ]);
    let mut s = Sim::new(def, json!({}));
    s.decide();
    assert_eq!(s.waits, [("cool_off".to_owned(), Some(s.now.plus(Duration::from_secs(60))))]);
    s.end_control("cool_off", json!({}));
    assert_eq!(s.waits[1], ("approval".to_owned(), None), "a signal wait has no time");
    s.end_control("approval", json!({"by": "ann"}));
    assert_eq!(s.state_of("past"), StepState::Processed, "a time already passed does not wait");
    assert_eq!(s.input_of("go"), &json!("ann"));
}

#[test]
fn terminate_ends_the_task_and_cancels_what_runs() {
    let stop = StepDef::switch("gate", "${task.input.stop}")
        .case("true", vec![StepDef::terminate("halt", EndStatus::Completed, json!({"why": "${task.input.why}"}))]);
    let def = wf(vec![StepDef::fork("f", vec![vec![a("slow")], vec![stop, a("never")]])]);
    let mut s = Sim::new(def, json!({"stop": true, "why": "duplicate"}));
    assert_eq!(s.decide(), TaskMove::Complete { output: json!({"why": "duplicate"}) });
    assert_eq!(s.state_of("slow"), StepState::Cancelled);
    assert!(!s.names().contains(&"never"));
}

fn undoable() -> WorkflowDef {
    wf(vec![
        a("reserve").compensated_by(a("release")),
        a("charge").compensated_by(a("refund").with_input(json!({"payment": "${charge.output.id}"}))),
        a("notify"),
        a("ship"),
    ])
}

#[test]
fn a_failed_task_undoes_its_completed_steps_newest_first() {
    let mut s = Sim::new(undoable(), json!({"order": 1}));
    s.decide();
    s.finish("reserve", json!(null));
    s.finish("charge", json!({"id": "P1"}));
    s.finish("notify", json!(null));
    let m = s.fail("ship");
    assert_eq!(m, TaskMove::Compensate { step: "ship".into(), reason: "refused".into() });
    assert_eq!(s.pending(), ["refund"], "the newest completed step with a compensation first");
    assert_eq!(s.input_of("refund"), &json!({"payment": "P1"}));
    s.finish("refund", json!(null));
    assert_eq!(s.pending(), ["release"]);
    assert_eq!(s.input_of("release"), &json!({"order": 1}), "without a template: the undone step's input");
    assert_eq!(s.finish("release", json!(null)), TaskMove::Compensated);
}

#[test]
fn a_compensation_that_fails_for_good_stops_and_alerts() {
    let mut s = Sim::new(undoable(), json!({}));
    s.decide();
    s.finish("reserve", json!(null));
    s.finish("charge", json!({"id": "P1"}));
    s.finish("notify", json!(null));
    s.fail("ship");
    assert_eq!(s.fail("refund"), TaskMove::CompensationFailed { step: "refund".into() });
    assert!(!s.names().contains(&"release"), "nothing older is undone past a failed compensation");
    let plan = plan_retry(&s.def, s.state, &s.rows).unwrap();
    assert_eq!(plan.task_state, TaskState::Compensating, "the retry goes on compensating");
    s.apply(plan);
    s.decide();
    assert_eq!(s.pending(), ["refund"]);
}

#[test]
fn without_the_policy_or_anything_to_undo_a_failure_is_final() {
    let mut def = undoable();
    def.compensate_on_failure = false;
    let mut s = Sim::new(def, json!({}));
    s.decide();
    s.finish("reserve", json!(null));
    assert!(matches!(s.fail("charge"), TaskMove::Fail { .. }));
    let mut s = Sim::new(undoable(), json!({}));
    s.decide();
    assert!(matches!(s.fail("reserve"), TaskMove::Fail { .. }), "nothing completed, nothing to undo");
}

#[test]
fn a_compensating_task_undoes_loop_passes_each_with_its_own_instance() {
    let def = wf(vec![
        StepDef::do_while("each", "${each.output.iteration < 2}", 5, vec![a("book").compensated_by(a("unbook"))]),
        a("pay"),
    ]);
    let mut s = Sim::new(def, json!({}));
    s.decide();
    s.finish("book#1", json!(1));
    s.finish("book#2", json!(2));
    s.fail("pay");
    assert_eq!(s.pending(), ["unbook#2"]);
    s.finish("unbook#2", json!(null));
    assert_eq!(s.pending(), ["unbook#1"]);
}

#[test]
fn retry_rerun_and_skip_plans() {
    let mut s =
        Sim::new(wf(vec![a("one"), StepDef::fork("f", vec![vec![a("two")], vec![a("three")]]), a("four")]), json!({}));
    s.decide();
    s.finish("one", json!(1));
    s.finish("three", json!(3));
    let mut no_undo = s.def.clone();
    no_undo.compensate_on_failure = false;
    s.def = no_undo;
    assert!(matches!(s.fail("two"), TaskMove::Fail { .. }));
    assert!(plan_retry(&s.def, TaskState::Running, &s.rows).is_err(), "only a failed task");

    let retry = plan_retry(&s.def, s.state, &s.rows).unwrap();
    assert_eq!(
        retry.changes,
        [RowChange::Reopen { name: "f".into(), output: None }, RowChange::Reset { name: "two".into() }]
    );

    let skip = plan_skip(&s.def, s.state, &s.rows, "two", json!("skipped")).unwrap();
    s.apply(skip);
    s.decide();
    assert_eq!(s.pending(), ["four"], "the skipped step counts as done; the fork joins");
    assert!(plan_skip(&s.def, s.state, &s.rows, "f", json!(null)).is_err(), "only agent steps");

    s.finish("four", json!(4));
    assert_eq!(s.state, TaskState::Completed);
    assert!(plan_rerun(&s.def, s.state, &s.rows, "nope").is_err());
    let rerun = plan_rerun(&s.def, s.state, &s.rows, "three").unwrap();
    s.apply(rerun);
    s.decide();
    assert_eq!(s.pending(), ["three"], "the rerun step runs again; its sibling's work stays");
    assert_eq!(s.state_of("two"), StepState::Processed);
    assert!(!s.names().contains(&"four"), "what came after goes");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn def() -> WorkflowDef {
        wf(vec![
            a("first").compensated_by(a("undo_first")),
            StepDef::fork(
                "f",
                vec![
                    vec![StepDef::do_while("l", "${l.output.iteration < 3}", 3, vec![a("in_loop")])],
                    vec![StepDef::switch("s", "${first.output}").case("1", vec![a("one")]).otherwise(vec![a("other")])],
                ],
            ),
            a("last"),
        ])
    }

    proptest! {
        /// Whatever the agents answer, in whatever order: no step is created twice, a processed
        /// step is never scheduled again, and an ended task has no live steps.
        #[test]
        fn the_decider_never_schedules_twice(moves in proptest::collection::vec((0usize..8, 0u8..10), 1..60)) {
            let mut s = Sim::new(def(), json!({}));
            s.decide();
            for (pick, outcome) in moves {
                let pending: Vec<String> = s.pending().iter().map(|p| p.to_string()).collect();
                if pending.is_empty() {
                    break;
                }
                let name = &pending[pick % pending.len()];
                if outcome == 0 { s.fail(name); } else { s.finish(name, json!(outcome % 3)); }
                let live = s.rows.iter().filter(|r| r.is_live()).count();
                if s.state.is_terminal() {
                    prop_assert_eq!(live, 0, "an ended task has no live steps: {:?}", s.rows);
                }
            }
        }
    }
}
