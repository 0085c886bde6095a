//! The Conductor importer on the examples of `examples/conductor/`: what each maps to, that the
//! result runs through the decider to the end a Conductor run would reach, and that what cannot be
//! mapped is refused at the right place.

use serde_json::{Value, json};
use shiftboss_conductor::{
    AgentLimits, ConductorImport, from_conductor, from_conductor_with_tasks, looks_like_conductor,
};
use shiftboss_core::decider::memory::MemoryTask;
use shiftboss_core::decider::{ChildTask, StepView, TaskMove};
use shiftboss_core::retry::{RetryDecision, RetryPolicy};
use shiftboss_core::workflow::{EndStatus, OnTimeout, StepDef, StepKind, WorkflowDef};
use shiftboss_core::{StepState, TaskState, Timestamp};
use std::time::Duration;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/conductor/");

fn read(file: &str) -> String {
    std::fs::read_to_string(format!("{DIR}{file}")).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn doc(file: &str) -> Value {
    serde_json::from_str(&read(file)).unwrap()
}

fn import(file: &str) -> ConductorImport {
    from_conductor(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn pipeline() -> ConductorImport {
    from_conductor_with_tasks(&read("image_pipeline.json"), &[&read("image_pipeline_taskdefs.json")]).unwrap()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn step<'a>(def: &'a WorkflowDef, name: &str) -> &'a StepDef {
    def.find(name).unwrap_or_else(|| panic!("no step {name}"))
}

fn has_note(i: &ConductorImport, start: &str) -> bool {
    i.notes.iter().any(|n| n.starts_with(start))
}

/// The decisions after each failure, until the policy gives up.
fn schedule(p: &RetryPolicy) -> Vec<RetryDecision> {
    let mut out = Vec::new();
    for n in 1..100 {
        let d = p.after_failure(n, 0.0);
        out.push(d);
        if d == RetryDecision::GiveUp {
            break;
        }
    }
    out
}

fn after(delays: &[u64]) -> Vec<RetryDecision> {
    delays.iter().map(|s| RetryDecision::RetryAfter(secs(*s))).chain([RetryDecision::GiveUp]).collect()
}

/// Plays the store around the decider: a [`MemoryTask`], whose refusals fail the test.
struct Run(MemoryTask);

impl std::ops::Deref for Run {
    type Target = MemoryTask;
    fn deref(&self) -> &MemoryTask {
        &self.0
    }
}

impl Run {
    fn new(def: &WorkflowDef, input: Value) -> Run {
        Run(MemoryTask::new(def.clone(), input, Timestamp(1_000_000)))
    }

    fn decide(&mut self) -> TaskMove {
        self.0.decide().unwrap_or_else(|e| panic!("{e}; rows: {:?}", self.0.names()))
    }

    fn row(&self, name: &str) -> &StepView {
        self.0.row(name).unwrap_or_else(|| panic!("no row {name}; rows: {:?}", self.names()))
    }

    /// An agent step replies; the store then decides.
    fn finish(&mut self, name: &str, output: Value) -> TaskMove {
        self.0.finish(name, output).unwrap()
    }

    /// A control row ends from outside: a timer, a signal, a child task.
    fn end_control(&mut self, name: &str, output: Value) -> TaskMove {
        self.0.end_control(name, output).unwrap()
    }
}

// --- order_fulfillment.json: SIMPLE chain, SWITCH value-param, TERMINATE, HTTP, TaskDefs ---

#[test]
fn order_fulfillment_maps_tasks_inputs_and_task_defs() {
    let i = import("order_fulfillment.json");
    let d = &i.workflow;
    assert_eq!((d.name.as_str(), d.version), ("order_fulfillment", 2));
    assert_eq!(d.timeout, Some(secs(3600)));
    let top: Vec<(&str, StepKind)> = d.steps.iter().map(|s| (s.name.as_str(), s.kind)).collect();
    assert_eq!(
        top,
        [
            ("validate", StepKind::Agent),
            ("charge", StepKind::Agent),
            ("shipping_route", StepKind::Switch),
            ("notify", StepKind::Agent)
        ]
    );

    let validate = step(d, "validate");
    assert_eq!(validate.agent.as_deref(), Some("validate_order"), "the Conductor task type is the agent");
    assert_eq!(validate.input, Some(json!({"orderId": "${task.input.orderId}", "requestedBy": "${task.id}"})));
    assert_eq!((validate.timeout, validate.response_timeout), (Some(secs(60)), Some(secs(30))));
    assert_eq!(validate.on_timeout, OnTimeout::Retry);
    assert_eq!(schedule(validate.retry.as_ref().unwrap()), after(&[5, 5]), "FIXED: retryCount retries");

    let charge = step(d, "charge");
    assert_eq!(charge.input.as_ref().unwrap()["amount"], json!("${validate.output.total}"));
    assert_eq!(charge.input.as_ref().unwrap()["memo"], json!("order ${task.input.orderId}"));
    assert_eq!(charge.on_timeout, OnTimeout::FailTask, "TIME_OUT_WF");
    assert_eq!(schedule(charge.retry.as_ref().unwrap()), after(&[2, 4, 8, 16]), "EXPONENTIAL_BACKOFF");

    let route = step(d, "shipping_route");
    assert_eq!(route.expression.as_deref(), Some("${task.input.shippingMethod}"));
    assert_eq!(route.cases.keys().collect::<Vec<_>>(), ["express", "pickup"]);
    assert_eq!(route.default[0].name, "ship_standard");
    let pickup = &route.cases["pickup"][0];
    assert_eq!((pickup.kind, pickup.status), (StepKind::Terminate, Some(EndStatus::Completed)));
    assert_eq!(pickup.output, Some(json!({"orderId": "${task.input.orderId}", "shipped": false})));

    let express = step(d, "ship_express");
    assert_eq!(schedule(express.retry.as_ref().unwrap()), after(&[20, 40, 60]), "LINEAR_BACKOFF: 10 s * 2 * n");
    assert_eq!(express.on_timeout, OnTimeout::AlertOnly);
    assert_eq!((express.claim_timeout, express.total_timeout), (Some(secs(60)), None), "pollTimeoutSeconds");
    assert_eq!(express.response_timeout, None, "3600 s is longer than the 300 s timeout");
    assert!(has_note(&i, "taskDefs[2].responseTimeoutSeconds"), "{:?}", i.notes);
    assert_eq!(schedule(step(d, "ship_standard").retry.as_ref().unwrap()), after(&[]), "retryCount 0");

    let notify = step(d, "notify");
    assert_eq!(notify.agent.as_deref(), Some("http"));
    assert_eq!(
        notify.config,
        json!({"url": "http://notifier.internal:8080/send", "method": "POST", "output": "conductor",
               "headers": {"X-Team": "orders", "Accept": "application/json"},
               "content_type": "application/json", "timeout_ms": 3000})
    );
    assert_eq!(notify.input.as_ref().unwrap()["to"], json!("${task.input.customerEmail}"), "the body is the input");
    assert!(has_note(&i, "tasks[3].inputParameters.http_request.connectionTimeOut"), "{:?}", i.notes);
    assert!(has_note(&i, "tasks[3]: no TaskDef named \"notify_customer\""), "{:?}", i.notes);

    assert_eq!(
        d.output,
        Some(json!({"orderId": "${task.input.orderId}", "paymentId": "${charge.output.paymentId}",
                    "notified": "${notify.output.response.body.accepted}"}))
    );
    assert_eq!(
        i.limits,
        [AgentLimits { agent: "charge_payment".into(), max_concurrent: Some(10), per_second: Some(5.0) }]
    );
}

fn order_run(method: &str) -> Run {
    let mut r = Run::new(
        &import("order_fulfillment.json").workflow,
        json!({
            "orderId": "A-1", "customerEmail": "ann@example.com", "shippingMethod": method
        }),
    );
    assert_eq!(r.decide(), TaskMove::Stay);
    assert_eq!(r.pending(), ["validate"]);
    assert_eq!(r.row("validate").input, json!({"orderId": "A-1", "requestedBy": 1}));
    r.finish("validate", json!({"total": 42}));
    assert_eq!(r.row("charge").input, json!({"orderId": "A-1", "amount": 42, "currency": "EUR", "memo": "order A-1"}));
    r
}

#[test]
fn order_fulfillment_runs_the_case_the_customer_chose() {
    let mut r = order_run("express");
    r.finish("charge", json!({"paymentId": "P-9"}));
    assert_eq!(r.pending(), ["ship_express"]);
    assert_eq!(r.row("ship_express").input, json!({"orderId": "A-1", "paymentId": "P-9"}));
    r.finish("ship_express", json!({"tracking": "T1"}));
    assert_eq!(r.row("notify").input, json!({"to": "ann@example.com", "template": "order_shipped", "orderId": "A-1"}));
    let end = r.finish("notify", json!({"response": {"statusCode": 200, "body": {"accepted": true}}}));
    assert_eq!(end, TaskMove::Complete { output: json!({"orderId": "A-1", "paymentId": "P-9", "notified": true}) });

    let mut r = order_run("ground");
    r.finish("charge", json!({"paymentId": "P-9"}));
    assert_eq!(r.pending(), ["ship_standard"], "an unknown method takes the default case");
}

#[test]
fn order_fulfillment_pickup_terminates_early() {
    let mut r = order_run("pickup");
    let end = r.finish("charge", json!({"paymentId": "P-9"}));
    assert_eq!(end, TaskMove::Complete { output: json!({"orderId": "A-1", "shipped": false}) });
    assert!(!r.names().contains(&"notify"), "nothing after the terminate runs");
}

// --- image_pipeline.json: FORK_JOIN + JOIN, TaskDefs given apart ---

#[test]
fn image_pipeline_maps_the_fork_and_drops_the_join() {
    let i = pipeline();
    let d = &i.workflow;
    let top: Vec<&str> = d.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(top, ["fetch", "renditions", "publish"], "the JOIN becomes part of the fork");
    let fork = step(d, "renditions");
    assert_eq!(fork.kind, StepKind::Fork);
    let branches: Vec<Vec<&str>> = fork.branches.iter().map(|b| b.iter().map(|s| s.name.as_str()).collect()).collect();
    assert_eq!(branches, [vec!["thumbnail", "upload_thumbnail"], vec!["large"], vec!["labels"]]);
    assert_eq!(
        step(d, "thumbnail").input,
        Some(json!({"image": "${fetch.output.location}", "width": 128, "format": "webp"})),
        "inputTemplate fills what the task does not set"
    );
    assert_eq!(
        step(d, "publish").input,
        Some(json!({"thumbnail": "${upload_thumbnail.output.url}", "large": "${large.output.file}",
                    "labels": "${labels.output.response.body.labels}"})),
        "reads of the JOIN's output read the joined task; an HTTP task's output is its response, as in Conductor"
    );
    assert_eq!(
        step(d, "labels").config,
        json!({"url": "http://vision.internal/labels", "method": "POST", "output": "conductor"})
    );
    assert_eq!(step(d, "upload_thumbnail").timeout, Some(secs(120)));
    assert_eq!(schedule(step(d, "upload_thumbnail").retry.as_ref().unwrap()), after(&[60, 60, 60]), "defaults");
    assert_eq!(schedule(step(d, "publish").retry.as_ref().unwrap()), after(&[30, 60]));
    assert_eq!(
        i.limits,
        [
            AgentLimits { agent: "resize_image".into(), max_concurrent: Some(4), per_second: None },
            AgentLimits { agent: "publish_image".into(), max_concurrent: None, per_second: Some(5.0) },
        ]
    );
    assert_eq!(d.timeout, None, "timeoutSeconds 0 is no timeout");
    assert!(has_note(&i, "tasks[1].forkTasks[2][0]: no TaskDef"), "{:?}", i.notes);
}

#[test]
fn task_defs_in_a_bundle_or_apart_give_the_same_definition() {
    let bundle = json!({"workflowDef": doc("image_pipeline.json"), "taskDefs": doc("image_pipeline_taskdefs.json")});
    let from_bundle = from_conductor(&bundle.to_string()).unwrap();
    assert_eq!(from_bundle, pipeline());
    let one_by_one: Vec<String> =
        doc("image_pipeline_taskdefs.json").as_array().unwrap().iter().map(Value::to_string).collect();
    let texts: Vec<&str> = one_by_one.iter().map(String::as_str).collect();
    assert_eq!(from_conductor_with_tasks(&read("image_pipeline.json"), &texts).unwrap(), pipeline());
    let without = from_conductor(&read("image_pipeline.json")).unwrap();
    assert_eq!(step(&without.workflow, "fetch").retry, None, "no TaskDef, no policy of its own");
}

#[test]
fn image_pipeline_runs_its_branches_side_by_side() {
    let mut r = Run::new(&pipeline().workflow, json!({"imageUrl": "http://img/1.png"}));
    r.decide();
    assert_eq!(r.row("fetch").input, json!({"url": "http://img/1.png"}));
    r.finish("fetch", json!({"location": "s3://raw/1.png"}));
    assert_eq!(r.pending(), ["thumbnail", "large", "labels"]);
    assert_eq!(r.row("labels").input, json!({"image": "s3://raw/1.png"}));
    r.finish("large", json!({"file": "large.webp"}));
    r.finish("labels", json!({"response": {"statusCode": 200, "body": {"labels": ["cat"]}}}));
    r.finish("thumbnail", json!({"file": "thumb.webp"}));
    assert_eq!(r.pending(), ["upload_thumbnail"], "the join waits for the whole first branch");
    r.finish("upload_thumbnail", json!({"url": "http://cdn/thumb.webp"}));
    assert_eq!(
        r.row("publish").input,
        json!({"thumbnail": "http://cdn/thumb.webp", "large": "large.webp", "labels": ["cat"]})
    );
    assert_eq!(
        r.finish("publish", json!({"id": "IMG-1"})),
        TaskMove::Complete { output: json!({"published": "IMG-1"}) }
    );
}

// --- monthly_report.json: DO_WHILE, WAIT (duration, signal), SWITCH javascript, SUB_WORKFLOW ---

#[test]
fn monthly_report_maps_the_loop_waits_and_sub_workflow() {
    let i = import("monthly_report.json");
    let d = &i.workflow;
    let poll = step(d, "poll");
    assert_eq!(poll.kind, StepKind::DoWhile);
    assert_eq!(poll.condition.as_deref(), Some("${poll.output.iteration < 3}"));
    assert_eq!(poll.max_iterations, Some(3), "the loop is not cut short by the default cap");
    assert_eq!(poll.body.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["cool_off", "check"]);
    assert_eq!(step(d, "cool_off").duration, Some(secs(10)));
    // JavaScript beyond `$.param` is evaluated by the `inline` agent, in a step before the switch.
    let top: Vec<&str> = d.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(top, ["start", "poll", "delivery_case", "delivery"]);
    let case = step(d, "delivery_case");
    assert_eq!(case.agent.as_deref(), Some("inline"));
    assert_eq!(
        case.config,
        json!({"script": "$.format == 'pdf' ? 'print' : ($.format == 'html' ? 'digital' : 'other')"})
    );
    assert_eq!(case.input, Some(json!({"format": "${task.input.format}"})), "`$` is the switch's inputs");
    assert_eq!(step(d, "delivery").expression.as_deref(), Some("${delivery_case.output.result}"));
    assert!(has_note(&i, "tasks[2].expression: evaluated in JavaScript"), "{:?}", i.notes);
    assert_eq!(step(d, "approval").signal.as_deref(), Some("approval"), "a WAIT without time waits for a signal");
    let print = step(d, "print");
    assert_eq!((print.workflow.as_deref(), print.workflow_version), (Some("print_and_mail"), Some(2)));
    assert_eq!(
        print.input,
        Some(json!({"reportId": "${start.output.reportId}", "approvedBy": "${approval.output.approver}"}))
    );
    let end = step(d, "unknown_format");
    assert_eq!(
        (end.status, end.output.clone()),
        (Some(EndStatus::Failed), Some(json!({"format": "${task.input.format}"})))
    );
}

fn report_run(format: &str) -> Run {
    let mut r = Run::new(&import("monthly_report.json").workflow, json!({"month": "2024-05", "format": format}));
    r.decide();
    r.finish("start", json!({"reportId": "R1"}));
    for pass in 1..=3 {
        let wait = format!("cool_off#{pass}");
        let wake = r.waits.iter().find(|(n, _)| *n == wait).and_then(|w| w.1);
        assert_eq!(wake, Some(r.now.plus(secs(10))), "pass {pass} cools off for 10 s");
        r.end_control(&wait, json!({}));
        let check = format!("check#{pass}");
        assert_eq!(r.row(&check).input, json!({"reportId": "R1", "attempt": pass}));
        r.finish(&check, json!({"state": "RUNNING"}));
    }
    assert_eq!(r.row("poll").state, StepState::Processed, "three passes, as `iteration < 3` says");
    assert!(!r.names().contains(&"cool_off#4"));
    // What the JavaScript engine answers (shiftboss-scripts runs it for real, end to end).
    assert_eq!(r.row("delivery_case").input, json!({"format": format}));
    let case = match format {
        "pdf" => "print",
        "html" => "digital",
        _ => "other",
    };
    r.finish("delivery_case", json!({"result": case}));
    r
}

#[test]
fn monthly_report_loops_three_times_then_waits_for_approval_and_prints() {
    let mut r = report_run("pdf");
    assert_eq!(r.row("delivery").output.as_ref().unwrap()["case"], json!("print"));
    assert_eq!(r.row("approval").state, StepState::Processing);
    assert_eq!(r.waits.last(), Some(&("approval".to_owned(), None)), "a signal has no wake time");
    r.end_control("approval", json!({"approver": "ann"}));
    assert_eq!(
        r.children,
        [ChildTask {
            workflow: "print_and_mail".into(),
            version: Some(2),
            input: json!({"reportId": "R1", "approvedBy": "ann"}),
            detached: false,
        }]
    );
    let end = r.end_control("print", json!({"mailed": true}));
    assert_eq!(end, TaskMove::Complete { output: json!({"reportId": "R1", "checks": 3}) });
}

#[test]
fn monthly_report_sends_html_and_fails_other_formats() {
    let mut r = report_run("html");
    assert_eq!(r.pending(), ["send"]);
    assert!(matches!(r.finish("send", json!(null)), TaskMove::Complete { .. }));

    let r = report_run("csv");
    assert_eq!(r.state, TaskState::Failed);
    assert!(r.names().contains(&"unknown_format"));
}

// --- legacy_approval.json: DECISION, WAIT until and duration ---

#[test]
fn legacy_approval_maps_decision_and_waits() {
    let i = import("legacy_approval.json");
    let d = &i.workflow;
    let tier = step(d, "tier");
    assert_eq!((tier.kind, tier.expression.as_deref()), (StepKind::Switch, Some("${task.input.customer.tier}")));
    assert_eq!(step(d, "launch").until.as_deref(), Some("2030-01-31T09:00:00Z"));
    assert_eq!(step(d, "grace").duration, Some(secs(120)));
    assert_eq!(d.timeout, None, "ALERT_ONLY cannot be honoured: the timeout goes, with a note");
    assert!(has_note(&i, "timeoutPolicy: ALERT_ONLY"), "{:?}", i.notes);
    assert_eq!(
        i.notes.iter().filter(|n| n.contains("no TaskDef named \"grant_access\"")).count(),
        1,
        "one note per task name: {:?}",
        i.notes
    );
}

#[test]
fn legacy_approval_waits_until_the_launch_then_a_grace_period() {
    let def = import("legacy_approval.json").workflow;
    let mut r = Run::new(&def, json!({"customer": {"tier": "gold", "id": "u1"}}));
    r.decide();
    assert_eq!(r.row("grant").input, json!({"user": "u1", "level": "full"}));

    let mut r = Run::new(&def, json!({"customer": {"tier": "silver", "id": "u2"}}));
    r.decide();
    let launch = humantime::parse_rfc3339("2030-01-31T09:00:00Z").unwrap();
    assert_eq!(r.waits, [("launch".to_owned(), Some(Timestamp::from_system(launch)))]);
    r.end_control("launch", json!({}));
    assert_eq!(r.waits[1], ("grace".to_owned(), Some(r.now.plus(secs(120)))));
    r.end_control("grace", json!({}));
    assert_eq!(r.row("grant_later").input, json!({"user": "u2", "level": "basic"}));
    assert!(matches!(r.finish("grant_later", json!({"ok": true})), TaskMove::Complete { .. }));
}

// --- refusals ---

/// Imports `file` after `edit`; the error's path and problem.
fn refused(file: &str, edit: impl FnOnce(&mut Value)) -> (String, String) {
    let mut v = doc(file);
    edit(&mut v);
    match from_conductor(&v.to_string()) {
        Ok(i) => panic!("{file} was imported after the edit: {:?}", i.workflow),
        Err(e) => (e.path, e.problem),
    }
}

fn wf(v: &mut Value) -> &mut Value {
    if v.get("workflowDef").is_some() { &mut v["workflowDef"] } else { v }
}

#[test]
fn unsupported_task_types_are_refused_at_their_place() {
    let (path, problem) = refused("order_fulfillment.json", |v| wf(v)["tasks"][3]["type"] = json!("KAFKA_PUBLISH"));
    assert_eq!(path, "tasks[3].type");
    assert!(problem.contains("KAFKA_PUBLISH"), "{problem}");
    let (path, problem) =
        refused("image_pipeline.json", |v| v["tasks"][1]["forkTasks"][1][0]["type"] = json!("FORK_JOIN_DYNAMIC"));
    assert_eq!(path, "tasks[1].forkTasks[1][0]", "a dynamic fork needs its JOIN and its parameters");
    assert!(problem.contains("FORK_JOIN_DYNAMIC"), "{problem}");
    let (path, problem) = refused("image_pipeline.json", |v| v["tasks"][1]["forkTasks"][1][0]["type"] = json!("EVENT"));
    assert_eq!(path, "tasks[1].forkTasks[1][0].sink", "an EVENT names its sink");
    assert!(problem.contains("sink"), "{problem}");
    let (path, _) = refused("order_fulfillment.json", |v| {
        wf(v)["tasks"][2]["decisionCases"]["express"][0]["type"] = json!("KAFKA_PUBLISH")
    });
    assert_eq!(path, "tasks[2].decisionCases.express[0].type");
}

#[test]
fn joins_must_join_every_branch_right_after_their_fork() {
    // A JOIN on some branches imports: the fork waits for those, the others run on.
    let mut v = doc("image_pipeline.json");
    v["tasks"][2]["joinOn"] = json!(["upload_thumbnail", "large"]);
    let import = from_conductor(&v.to_string()).expect("a JOIN on some branches imports");
    let fork = import.workflow.steps.iter().find(|s| !s.branches.is_empty()).unwrap();
    assert_eq!(fork.join_on, ["large", "upload_thumbnail"]);
    let (path, problem) = refused("image_pipeline.json", |v| v["tasks"][2]["joinOn"] = json!([]));
    assert_eq!(path, "tasks[2].joinOn");
    assert!(problem.contains("labels"), "names the branch ends: {problem}");
    let (path, _) =
        refused("image_pipeline.json", |v| v["tasks"][2]["joinOn"] = json!(["thumbnail", "large", "labels"]));
    assert_eq!(path, "tasks[2].joinOn", "the middle of a branch is no end");
    let (path, _) = refused("image_pipeline.json", |v| {
        v["tasks"].as_array_mut().unwrap().remove(2);
    });
    assert_eq!(path, "tasks[1]", "a fork without its join");
    let (path, _) = refused("image_pipeline.json", |v| {
        let join = v["tasks"].as_array_mut().unwrap().remove(2);
        v["tasks"].as_array_mut().unwrap().push(join);
    });
    assert_eq!(path, "tasks[1]", "the join must come right after");
    let (path, _) = refused("image_pipeline.json", |v| v["tasks"][1]["forkTasks"][1] = json!([]));
    assert_eq!(path, "tasks[1].forkTasks[1]");
}

#[test]
fn loop_conditions_beyond_the_common_forms_are_evaluated_in_javascript() {
    for c in [
        "$.poll['iteration'] < Math.max(3, 4)",
        "var x = $.poll['iteration']; x < 3",
        "$.check['state'].startsWith('DONE')",
        "$.start['reportId'] != null",
        "if ($.poll['iteration'] < 3) { true; } else { 1; }",
    ] {
        let mut v = doc("monthly_report.json");
        v["tasks"][1]["loopCondition"] = json!(c);
        let i = from_conductor(&v.to_string()).unwrap_or_else(|e| panic!("{c}: {e}"));
        let poll = step(&i.workflow, "poll");
        assert_eq!(poll.condition.as_deref(), Some("${poll_condition.output.result}"), "{c}");
        let body: Vec<&str> = poll.body.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(body, ["cool_off", "check", "poll_condition"], "{c}: evaluated last in each pass");
        let cond = step(&i.workflow, "poll_condition");
        assert_eq!(cond.config, json!({"script": c, "as": "bool"}));
        assert_eq!(
            cond.input,
            Some(json!({"poll": {"iteration": "${poll.output.iteration}"}, "check": "${check.output}",
                        "cool_off": "${cool_off.output}"})),
            "`$` as Conductor binds it: the loop, and each task of its body by reference name"
        );
        assert_eq!(poll.max_iterations, Some(100), "{c}: the default cap");
    }
}

#[test]
fn loop_conditions_in_the_common_forms_translate() {
    let with = |c: &str| {
        let mut v = doc("monthly_report.json");
        v["tasks"][1]["loopCondition"] = json!(c);
        from_conductor(&v.to_string()).unwrap_or_else(|e| panic!("{c}: {e}"))
    };
    let i = with("if ($.poll['iteration'] < 5) { true; } else { false; }");
    assert_eq!(step(&i.workflow, "poll").condition.as_deref(), Some("${poll.output.iteration < 5}"));
    assert_eq!(step(&i.workflow, "poll").max_iterations, Some(5));
    let i = with("$.poll.iteration <= 4;");
    assert_eq!(step(&i.workflow, "poll").max_iterations, Some(5));
    let i = with("if ($.check['state'] == 'DONE') { false; } else { true; }");
    assert_eq!(step(&i.workflow, "poll").condition.as_deref(), Some("${poll_condition.output.result}"));
    assert_eq!(step(&i.workflow, "poll").max_iterations, Some(100), "the default cap, with a note");
    assert!(has_note(&i, "tasks[1].loopCondition: the loop stops"), "{:?}", i.notes);

    // The condition's step reads the pass's own output; the loop ends when it answers false.
    let mut r = Run::new(&i.workflow, json!({"format": "html"}));
    r.decide();
    r.finish("start", json!({"reportId": "R1"}));
    r.end_control("cool_off#1", json!({}));
    r.finish("check#1", json!({"state": "RUNNING"}));
    assert_eq!(r.row("poll_condition#1").input["check"], json!({"state": "RUNNING"}));
    assert_eq!(r.row("poll_condition#1").input["poll"], json!({"iteration": 1}));
    r.finish("poll_condition#1", json!({"result": true}));
    r.end_control("cool_off#2", json!({}));
    r.finish("check#2", json!({"state": "DONE"}));
    assert_eq!(r.row("poll_condition#2").input["check"], json!({"state": "DONE"}));
    r.finish("poll_condition#2", json!({"result": false}));
    assert_eq!(r.pending(), ["delivery_case"]);
}

#[test]
fn expressions_that_do_not_map_are_refused_with_their_field() {
    let (path, problem) = refused("order_fulfillment.json", |v| {
        wf(v)["tasks"][0]["inputParameters"]["requestedBy"] = json!("${workflow.ownerApp}")
    });
    assert_eq!(path, "tasks[0].inputParameters.requestedBy");
    assert!(problem.contains("workflow.correlationId map"), "names what maps: {problem}");
    let (path, _) = refused("order_fulfillment.json", |v| {
        wf(v)["tasks"][1]["inputParameters"]["nested"] = json!({"list": ["${workflow.status}"]})
    });
    assert_eq!(path, "tasks[1].inputParameters.nested.list[0]");
    let (path, problem) =
        refused("order_fulfillment.json", |v| wf(v)["outputParameters"]["x"] = json!("${nope.output.x}"));
    assert_eq!(path, "outputParameters.x");
    assert!(problem.contains("nope"), "{problem}");
    let (path, problem) =
        refused("monthly_report.json", |v| v["outputParameters"]["state"] = json!("${check.output.state}"));
    assert_eq!(path, "outputParameters.state");
    assert!(problem.contains("poll"), "a task of a loop read from outside it: {problem}");
    let (path, _) = refused("order_fulfillment.json", |v| {
        wf(v)["outputParameters"]["status"] = json!("${notify.output.statusCode}")
    });
    assert_eq!(path, "outputParameters.status", "an HTTP task's output is read under response");
    let (path, problem) = refused("order_fulfillment.json", |v| {
        wf(v)["tasks"][3]["inputParameters"]["http_request"]["headers"]["X-Who"] =
            json!("${workflow.secrets.T} ${workflow.input.who}")
    });
    assert_eq!(path, "tasks[3].inputParameters.http_request.headers.X-Who");
    assert!(problem.contains("secret"), "{problem}");
    let (path, _) = refused("order_fulfillment.json", |v| {
        wf(v)["tasks"][1]["inputParameters"]["amount"] = json!("${validate.output.total")
    });
    assert_eq!(path, "tasks[1].inputParameters.amount");
}

#[test]
fn switch_expressions_that_do_not_map_are_refused() {
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][2]["expression"] = json!("shipping"));
    assert_eq!(path, "tasks[2].expression", "value-param names no input parameter");
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][2]["evaluatorType"] = json!("jq"));
    assert_eq!(path, "tasks[2].evaluatorType");
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][2]["decisionCases"] = json!({}));
    assert_eq!(path, "tasks[2].decisionCases");
    let (path, problem) =
        refused("monthly_report.json", |v| v["tasks"][2]["expression"] = json!("$.format + '${workflow.input.x}'"));
    assert_eq!(path, "tasks[2].expression", "a script is static: {problem}");
}

#[test]
fn workflow_and_task_features_without_an_equivalent_are_refused() {
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["failureWorkflow"] = json!("order cleanup"));
    assert_eq!(path, "failureWorkflow", "a failure workflow's name must be a name");
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][0]["startDelay"] = json!(400 * 86_400));
    assert_eq!(path, "tasks[0].startDelay", "longer than the longest wait");
    // A task's own id: the workflow's and the task's reference name; in a loop, with its pass.
    let mut doc: Value = serde_json::from_str(&read("order_fulfillment.json")).unwrap();
    wf(&mut doc)["tasks"][0]["inputParameters"]["id"] = json!("${CPEWF_TASK_ID}");
    let i = from_conductor(&doc.to_string()).unwrap();
    assert_eq!(step(&i.workflow, "validate").input.as_ref().unwrap()["id"], json!("${task.id}-validate"));
    let mut doc: Value = serde_json::from_str(&read("monthly_report.json")).unwrap();
    doc["tasks"][1]["loopOver"][1]["inputParameters"]["id"] = json!("run ${CPEWF_TASK_ID}");
    let i = from_conductor(&doc.to_string()).unwrap();
    let inner = doc["tasks"][1]["loopOver"][1]["taskReferenceName"].as_str().unwrap().to_owned();
    let loop_name = doc["tasks"][1]["taskReferenceName"].as_str().unwrap().to_owned();
    assert_eq!(
        step(&i.workflow, &inner).input.as_ref().unwrap()["id"],
        json!(format!("run ${{task.id}}-{inner}#${{{loop_name}.output.iteration}}"))
    );
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["variables"] = json!([1]));
    assert_eq!(path, "variables");
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][1]["taskReferenceName"] = json!("charge it"));
    assert_eq!(path, "tasks[1].taskReferenceName");
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][1]["taskReferenceName"] = json!("task"));
    assert_eq!(path, "tasks[1].taskReferenceName", "`task` is our expressions' root");
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][1]["taskReferenceName"] = json!("validate"));
    assert_eq!(path, "tasks[1].taskReferenceName", "a duplicate");
    let (path, _) = refused("order_fulfillment.json", |v| wf(v)["tasks"][0]["name"] = json!("validate order"));
    assert_eq!(path, "tasks[0].name", "the agent name");
    let (path, problem) = refused("order_fulfillment.json", |v| {
        wf(v)["tasks"][0]["taskReferenceName"] = json!("validate-order");
        wf(v)["tasks"][1]["inputParameters"]["amount"] = json!("${validate-order.output.total}");
    });
    assert_eq!(path, "tasks[1].inputParameters.amount", "a name expressions cannot read, where it is read");
    assert!(problem.contains("rename"), "{problem}");
    let (path, _) = refused("monthly_report.json", |v| {
        v["tasks"][2]["defaultCase"][0]["inputParameters"]["terminationStatus"] = json!("TERMINATED")
    });
    assert_eq!(path, "tasks[2].defaultCase[0].inputParameters.terminationStatus");
    let (path, _) = refused("monthly_report.json", |v| {
        v["tasks"][2]["decisionCases"]["print"][1]["subWorkflowParam"]["workflowDefinition"] = json!({"name": "x"})
    });
    assert_eq!(
        path, "tasks[2].decisionCases.print[1].subWorkflowParam.workflowDefinition.tasks",
        "at its place inside"
    );
}

#[test]
fn waits_that_do_not_map_are_refused() {
    let wait = |params: Value| move |v: &mut Value| v["tasks"][1]["loopOver"][0]["inputParameters"] = params;
    let (path, _) = refused("monthly_report.json", wait(json!({"duration": "10s", "until": "2030-01-01"})));
    assert_eq!(path, "tasks[1].loopOver[0].inputParameters");
    let (path, _) = refused("monthly_report.json", wait(json!({"duration": "${workflow.pause}"})));
    assert_eq!(path, "tasks[1].loopOver[0].inputParameters.duration", "a computed duration reads what maps");
    let (path, _) = refused("monthly_report.json", wait(json!({"duration": "a while"})));
    assert_eq!(path, "tasks[1].loopOver[0].inputParameters.duration");
    let (path, _) = refused("monthly_report.json", wait(json!({"until": "2030-01-01 09:00 PST"})));
    assert_eq!(path, "tasks[1].loopOver[0].inputParameters.until");
}

#[test]
fn task_def_errors_name_the_task_def() {
    let def = |field: &'static str, value: Value| move |v: &mut Value| v["taskDefs"][1][field] = value;
    let (path, _) = refused("order_fulfillment.json", def("retryLogic", json!("RANDOM")));
    assert_eq!(path, "taskDefs[1].retryLogic");
    let (path, _) = refused("order_fulfillment.json", def("timeoutSeconds", json!(1_000_000)));
    assert_eq!(path, "taskDefs[1].timeoutSeconds");
    let (path, _) = refused("order_fulfillment.json", def("pollTimeoutSeconds", json!(400 * 86_400)));
    assert_eq!(path, "taskDefs[1].pollTimeoutSeconds");
    let (path, _) = refused("order_fulfillment.json", def("totalTimeoutSeconds", json!("soon")));
    assert_eq!(path, "taskDefs[1].totalTimeoutSeconds");
    let (path, _) = refused("order_fulfillment.json", def("timeoutPolicy", json!("PANIC")));
    assert_eq!(path, "taskDefs[1].timeoutPolicy");
    let (path, _) = refused("order_fulfillment.json", def("retryCount", json!(-1)));
    assert_eq!(path, "taskDefs[1].retryCount");
    let (path, _) = refused("order_fulfillment.json", def("name", json!("validate_order")));
    assert_eq!(path, "taskDefs[1].name", "two TaskDefs of one name");
    let err = from_conductor_with_tasks(&read("image_pipeline.json"), &["[{\"name\": \"x\",}]"]).unwrap_err();
    assert_eq!(err.path, "task_defs[0] line 1 column 15");
}

#[test]
fn json_syntax_errors_name_line_and_column() {
    let err = from_conductor("{\n  \"name\": \"x\",\n  \"tasks\": [\n}").unwrap_err();
    assert_eq!(err.path, "line 4 column 1");
    assert_eq!(from_conductor("[1]").unwrap_err().path, "document");
}

#[test]
fn validation_errors_of_the_result_are_reported_at_the_conductor_place() {
    // Switches nested deeper than our definitions allow: only validate() sees it.
    let mut task = json!({"name": "leaf", "taskReferenceName": "leaf", "type": "SIMPLE"});
    for level in 0..18 {
        task = json!({"name": "s", "taskReferenceName": format!("s{level}"), "type": "SWITCH",
                      "evaluatorType": "value-param", "expression": "v", "inputParameters": {"v": "x"},
                      "decisionCases": {"x": [task]}});
    }
    let def = json!({"name": "deep", "tasks": [task]});
    let e = from_conductor(&def.to_string()).unwrap_err();
    assert!(e.path.starts_with("tasks[0].decisionCases.x[0].decisionCases.x[0]"), "{e}");
    assert!(!e.path.contains("steps"), "{e}");
    assert!(e.problem.contains("in the shiftboss definition: steps[0].cases.x[0]"), "{e}");
}

#[test]
fn ignored_fields_are_noted() {
    let mut v = doc("monthly_report.json");
    v["workflowStatusListenerEnabled"] = json!(true);
    v["somethingNew"] = json!(1);
    v["tasks"][0]["loopCondition"] = json!("$.x < 1");
    v["tasks"][0]["cacheConfig"] = json!({"key": "k", "ttlInSecond": 60});
    let i = from_conductor(&v.to_string()).unwrap();
    for place in ["workflowStatusListenerEnabled:", "somethingNew:", "tasks[0].loopCondition:", "tasks[0].cacheConfig:"]
    {
        assert!(has_note(&i, place), "{place} in {:?}", i.notes);
    }
    let plain = import("image_pipeline.json");
    assert!(
        !plain.notes.iter().any(|n| n.contains("tasks[0].")),
        "empty fields of exports pass quietly: {:?}",
        plain.notes
    );
}

#[test]
fn the_reader_can_be_picked_by_looking() {
    for f in ["order_fulfillment.json", "image_pipeline.json", "monthly_report.json", "legacy_approval.json"] {
        assert!(looks_like_conductor(&read(f)), "{f}");
    }
    assert!(!looks_like_conductor(r#"{"name": "x", "steps": [{"name": "a", "agent": "http"}]}"#));
    assert!(!looks_like_conductor("name: x\nsteps:\n  - name: a\n    agent: http\n"));
    assert!(!looks_like_conductor("{ not json"));
    assert!(looks_like_conductor(r#"{"name": "x", "schemaVersion": 2}"#));
}

#[test]
fn an_imported_definition_reads_back_as_ours() {
    for i in
        [import("order_fulfillment.json"), pipeline(), import("monthly_report.json"), import("legacy_approval.json")]
    {
        let text = serde_json::to_string(&i.workflow).unwrap();
        assert_eq!(WorkflowDef::from_json(&text).unwrap(), i.workflow);
        assert!(!looks_like_conductor(&text));
    }
}

#[test]
fn a_conductor_secret_in_a_header_becomes_the_agents_secret_reference() {
    let mut v = doc("order_fulfillment.json");
    wf(&mut v)["tasks"][3]["inputParameters"]["http_request"]["headers"]["Authorization"] =
        json!("Bearer ${workflow.secrets.NOTIFIER_TOKEN}");
    let i = from_conductor(&v.to_string()).unwrap();
    let notify = step(&i.workflow, "notify");
    assert_eq!(notify.config["headers"]["Authorization"], json!("Bearer ${secret.NOTIFIER_TOKEN}"));
}
