//! Conductor definitions with scripted tasks (INLINE with both evaluators, LAMBDA, a JavaScript
//! SWITCH, a JavaScript loopCondition, JSON_JQ_TRANSFORM), written in Conductor's JSON, imported,
//! and run end to end by an engine on a SQLite file, with in-process agents standing in for the
//! SIMPLE workers and the real `inline` and `jq` agents; each ends in the state and output that
//! Conductor documents. And the sandbox's limits, seen from a task: a script that loops, grows
//! without end or reaches for I/O, or a filter that fails, fails its task with a clear error, and
//! the engine goes on with the next task.

mod common;

use common::{Harness, step};
use serde_json::json;
use shiftboss_core::{StepState, TaskState};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_tasks_with_both_evaluators_compute_what_conductor_computes() {
    let h = Harness::start("cart_pricing.json").await;
    let d = h.run("c-1", json!({"cartId": "C1", "member": true})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output, Some(json!({"total": 105, "due": 94.5, "size": "small", "invoice": "INV-94.5"})));
    assert_eq!(step(&d, "price").output, Some(json!({"result": {"total": 105, "due": 94.5, "lines": 2}})));
    assert_eq!(h.input_of("bill"), json!({"amount": 94.5, "size": "small"}));
    let d = h.run("c-2", json!({"cartId": "C2", "member": false})).await;
    assert_eq!(d.task.output.as_ref().unwrap()["size"], json!("large"), "graaljs: the same JavaScript");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lambda_runs_its_script_as_a_function_body() {
    let h = Harness::start("exam_grading.json").await;
    for (score, grade, pass) in [(95, "A", true), (60, "B", true), (12, "F", false)] {
        let d = h.run(&format!("s-{score}"), json!({"score": score})).await;
        assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
        assert_eq!(d.task.output, Some(json!({"grade": grade, "pass": pass})), "score {score}");
        assert_eq!(h.input_of("record"), json!({"grade": grade}));
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_switch_takes_the_case_its_script_names() {
    let h = Harness::start("parcel_routing.json").await;
    for (kg, country, case, ran) in
        [(50, "US", "freight", "freight"), (2, "US", "domestic", "domestic"), (2, "FR", "international", "abroad")]
    {
        let d = h.run(&format!("p-{case}"), json!({"kg": kg, "country": country})).await;
        assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
        assert_eq!(d.task.output, Some(json!({"route": case})), "evaluationResult[0] is the case");
        let names: Vec<&str> = d.steps.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&ran), "{case}: {names:?}");
        assert_eq!(names.iter().filter(|n| ["freight", "domestic", "abroad"].contains(n)).count(), 1, "{names:?}");
    }
    assert_eq!(h.input_of("abroad"), json!({"to": "FR"}));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_loop_condition_reads_each_pass() {
    let h = Harness::start("export_polling.json").await;
    let d = h.run("x-1", json!({"maxPolls": 10})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output, Some(json!({"polls": 3, "exportId": "EX-7"})), "ready on the third check");
    assert_eq!(step(&d, "polling_condition#3").output, Some(json!({"result": false})));
    assert_eq!(step(&d, "polling_condition#2").output, Some(json!({"result": true})));
    // The input parameter bounds it too: `iteration < limit`.
    let d = h.run("x-2", json!({"maxPolls": 2})).await;
    assert_eq!(d.task.output, Some(json!({"polls": 2, "exportId": "EX-7"})));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jq_transform_gives_result_and_result_list() {
    let h = Harness::start("user_digest.json").await;
    let d = h.run("u-1", json!({})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(
        d.task.output,
        Some(json!({
            "active": [{"email": "ann@example.com", "name": "Ann Lee"}, {"email": "cy@example.com", "name": "Cy Ng"}],
            "firstId": 1,
            "ids": [1, 2, 3]
        }))
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_past_the_sandbox_fail_their_task_clearly_and_the_engine_goes_on() {
    let h = Harness::start("runaway_script.json").await;
    for (mode, says) in [
        ("loop", "past its time limit"),
        ("grow", "out of memory"),
        ("io", "ReferenceError: require is not defined (scripts have no I/O"),
        ("throw", "RangeError: no such mode"),
    ] {
        let start = Instant::now();
        let d = h.run(&format!("r-{mode}"), json!({"mode": mode})).await;
        assert_eq!(d.task.state, TaskState::Failed, "{mode}: {:#?}", d.steps);
        let compute = step(&d, "compute");
        assert_eq!(compute.state, StepState::Error, "{mode}");
        let error = compute.last_error.clone().unwrap_or_default();
        assert!(error.contains(says), "{mode}: {error}");
        assert_eq!(compute.attempts, 1, "{mode}: a script's failure is permanent, not retried");
        assert!(start.elapsed() < Duration::from_secs(10), "{mode}: {:?}", start.elapsed());
        // The engine goes on: the next task runs to its end.
        let d = h.run(&format!("ok-after-{mode}"), json!({"mode": "fine"})).await;
        assert_eq!((d.task.state, d.task.output), (TaskState::Completed, Some(json!({"result": "ok"}))), "{mode}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jq_error_fails_its_task_with_the_filter_s_message() {
    let h = Harness::start("bad_filter.json").await;
    let d = h.run("b-1", json!({"items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 0}]})).await;
    assert_eq!(d.task.state, TaskState::Failed, "{:#?}", d.steps);
    let error = step(&d, "stock").last_error.clone().unwrap_or_default();
    assert!(error.contains("out of stock: B"), "{error}");
    let d = h.run("b-2", json!({"items": [{"sku": "A", "qty": 1}]})).await;
    assert_eq!(d.task.state, TaskState::Completed);
    assert_eq!(d.task.output, Some(json!({"result": ["A"], "resultList": [["A"]]})), "the last task's output");
    h.stop().await;
}
