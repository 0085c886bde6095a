//! Conductor's wider vocabulary, written in Conductor's JSON, imported and run end to end by an
//! engine on a SQLite file, with in-process agents standing in for the SIMPLE workers: SET_VARIABLE
//! and `${workflow.variables...}`, NOOP, a workflow's inputTemplate, optional and permissive tasks,
//! EXCLUSIVE_JOIN, TERMINATE with its terminationReason, failureWorkflow, START_WORKFLOW, DYNAMIC,
//! HUMAN, startDelay and FORK_JOIN_DYNAMIC in both its forms. Each ends in the state and output that Conductor documents. (The same
//! paths on PostgreSQL: the store conformance cases in `vocabulary.rs`.)

mod common;

use common::{Harness, step};
use serde_json::json;
use shiftboss_core::{StepState, TaskId, TaskState};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_noop_and_input_defaults_flow_as_in_conductor() {
    let h = Harness::start("loyalty_points.json").await;
    let d = h.run("m-1", json!({"memberId": "M1"})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(
        h.input_of("credit"),
        json!({"tier": "gold", "bonus": 50, "multiplier": 1, "flow": "loyalty_points v1"}),
        "the variable set, the input's default, the workflow's name"
    );
    assert_eq!(d.task.output, Some(json!({"credited": 150, "tier": "gold"})));
    assert_eq!(step(&d, "checkpoint").output, Some(json!({})), "a NOOP's output is empty");
    let d = h.run("m-2", json!({"memberId": "M2", "multiplier": 3})).await;
    assert_eq!(d.task.output, Some(json!({"credited": 350, "tier": "gold"})), "a given input beats the default");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_optional_task_fails_and_the_exclusive_join_gives_the_branch_that_ran() {
    let h = Harness::start_all(&["payment_failed.json", "card_or_wallet.json"]).await;
    for (method, payment) in [("card", "CARD-1"), ("wallet", "WAL-1")] {
        let d = h.run(&format!("o-{method}"), json!({"order": "O1", "method": method, "coupon": "X"})).await;
        assert_eq!(d.task.state, TaskState::Completed, "{method}: {:#?}", d.steps);
        assert_eq!(d.task.output, Some(json!({"paymentId": payment})), "{method}");
        let coupon = step(&d, "coupon");
        assert_eq!(coupon.state, StepState::Error, "Conductor's COMPLETED_WITH_ERRORS");
        assert_eq!(coupon.last_error.as_deref(), Some("coupon expired"));
        assert_eq!(h.input_of("receipt"), json!({"payment": payment, "discount": null}), "{method}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminate_s_reason_fails_the_task_and_starts_its_failure_workflow() {
    let h = Harness::start_all(&["payment_failed.json", "card_or_wallet.json"]).await;
    let d = h.run("o-none", json!({"order": "O3", "method": "cash"})).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let failed = d.events.iter().find(|e| e.kind == "task.failed").expect("the failure event");
    assert_eq!(failed.detail["reason"], json!("no way to pay for O3"), "terminationReason");
    let started = d.events.iter().find(|e| e.kind == "task.failure_workflow_started").expect("started");
    let alert = TaskId(started.detail["task_id"].as_i64().unwrap());
    let a = h.ended(alert).await;
    assert_eq!((a.task.workflow.as_str(), a.task.state), ("payment_failed", TaskState::Completed));
    assert_eq!(
        h.input_of("alert"),
        json!({"failed": d.task.id.0.to_string(), "why": "no way to pay for O3", "order": "O3"}),
        "the failure workflow reads the failed workflow's id, reason and input"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permissive_task_lets_the_next_run_then_fails_the_workflow() {
    let h = Harness::start("nightly_sync.json").await;
    let d = h.run("n-1", json!({})).await;
    assert_eq!(d.task.state, TaskState::Failed, "{:#?}", d.steps);
    assert_eq!(step(&d, "crm").state, StepState::Error);
    assert_eq!(step(&d, "billing").state, StepState::Processed, "the task after it still ran");
    let failed = d.events.iter().find(|e| e.kind == "task.failed").unwrap();
    assert_eq!(failed.detail["step"], json!("crm"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_workflow_dynamic_and_human_run_as_in_conductor() {
    let h = Harness::start_all(&["audit_trail.json", "order_fanout.json"]).await;
    let id = h.submit("f-1", json!({"order": "O9", "carrier": "ship_domestic"})).await;
    let d = h.until(id, "waiting for its approval", |d| d.steps.iter().any(|s| s.name == "approval")).await;
    let audit = TaskId(step(&d, "audit").output.as_ref().unwrap()["task_id"].as_i64().unwrap());
    let a = h.ended(audit).await;
    assert_eq!((a.task.workflow.as_str(), a.task.state), ("audit_trail", TaskState::Completed), "it ran on its own");
    assert_eq!(a.task.parent_task_id, None);
    assert_eq!(h.input_of("ship"), json!({"carrierTask": "ship_domestic", "order": "O9"}), "the chosen task type ran");
    assert_eq!(step(&d, "ship").agent, "ship_domestic");
    assert_eq!(h.store.get_task(id).await.unwrap().unwrap().task.state, TaskState::Running, "a person must answer");

    h.signal(id, "approval", json!({"by": "ann"})).await;
    let d = h.ended(id).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output, Some(json!({"confirmed": true, "audit": audit.0})));
    assert_eq!(h.input_of("confirm"), json!({"audit": audit.0, "approvedBy": "ann", "carrier": "usps"}));
    let confirm = step(&d, "confirm");
    let scheduled = d.events.iter().find(|e| e.kind == "step.scheduled" && e.step_id == Some(confirm.id)).unwrap();
    let claimed = d.events.iter().find(|e| e.kind == "step.claimed" && e.step_id == Some(confirm.id)).unwrap();
    assert!(
        claimed.at.0 - scheduled.at.0 >= 1000,
        "startDelay 1 s: claimed {} ms after",
        claimed.at.0 - scheduled.at.0
    );

    // A task type that is not a name: the step cannot start, and the task fails saying why.
    let id = h.submit("f-2", json!({"order": "O10", "carrier": "no/such task"})).await;
    let d = h.ended(id).await;
    assert_eq!(d.task.state, TaskState::Failed, "not a name: the task fails with why");
    let why = d.events.iter().find(|e| e.kind == "task.failed").unwrap().detail["reason"].as_str().unwrap().to_owned();
    assert!(why.contains("gave \"no/such task\""), "{why}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_fork_runs_the_tasks_the_data_names_and_its_join_gives_their_outputs() {
    let h = Harness::start("image_variants.json").await;
    let d = h.run("i-1", json!({"image": "cat.png", "extraTag": "pets"})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(h.input_of("variants_each#2"), json!({"text": "(c)"}), "each task gets its input by reference name");
    let agents: Vec<&str> =
        d.steps.iter().filter(|s| s.name.starts_with("variants_each#")).map(|s| s.agent.as_str()).collect();
    assert_eq!(agents, ["resize_image", "watermark_image"], "the task types the data named");
    assert_eq!(
        step(&d, "variants").output,
        Some(json!({"thumb_ref": {"url": "thumb.png", "w": 100}, "mark_ref": {"url": "mark.png", "text": "(c)"}})),
        "the JOIN's output: each task's by reference name"
    );
    assert_eq!(
        h.input_of("publish"),
        json!({"thumb": "thumb.png", "tags": [{"tagged": "original"}, {"tagged": "pets"}]}),
        "forkTaskName/forkTaskInputs: one task per input, outputs in order"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_realistic_definition_runs_to_the_end() {
    let h = Harness::start_all(&["audit_trail.json", "payment_failed.json", "subscription_renewal.json"]).await;
    let d = h.run("s-1", json!({"account": "A-1", "invoiceTask": "invoice_eu_vat"})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    let out = d.task.output.clone().unwrap();
    assert_eq!(out["total"], json!(72.0), "3 pro seats at 20, plus 20% tax");
    assert_eq!((out["invoice"].clone(), out["charges"].clone()), (json!("EU-72.0"), json!(2)), "{out}");
    assert_eq!(out["plan"], json!("pro"));
    assert_eq!(step(&d, "fraud").state, StepState::Error, "optional: the workflow went on");
    let audit = TaskId(out["audit"].as_i64().unwrap());
    assert_eq!(h.ended(audit).await.task.state, TaskState::Completed, "the started audit ran on its own");

    let d = h.run("s-2", json!({"account": "A-US", "pause": "0s"})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output.as_ref().unwrap()["invoice"], json!("US-63.0"));

    let d = h.run("s-3", json!({"account": "A-XX"})).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let failed = d.events.iter().find(|e| e.kind == "task.failed").unwrap();
    assert_eq!(failed.detail["reason"], json!("no invoicing for xx"));
    assert!(d.events.iter().any(|e| e.kind == "task.failure_workflow_started"), "its failure workflow started");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_workflow_named_and_versioned_by_the_input_runs_and_a_task_def_s_input_template_fills_the_input() {
    let h = Harness::start_all(&["audit_trail.json", "report_dispatch.json"]).await;
    let d = h.run("r-1", json!({"month": "2026-10", "channel": "audit_trail"})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output, Some(json!({"report": "R-2026-10-pdf", "delivered": true})));
    assert_eq!(h.input_of("write"), json!({"order": "R-2026-10-pdf"}), "the child the input named ran");
    assert_eq!(h.input_of("build")["requestId"], json!(format!("{}-build", d.task.id)), "${{CPEWF_TASK_ID}}");
    let d = h.run("r-2", json!({"month": "2026-11", "channel": "no_such_flow"})).await;
    assert_eq!(d.task.state, TaskState::Failed, "a workflow that is not registered fails the step");
    assert!(step(&d, "deliver").last_error.as_deref().unwrap_or("").contains("not registered"), "{:#?}", d.steps);
    // The version from the input too: "1" (text, as Conductor takes it) runs; 9 is not registered.
    let d = h.run("r-3", json!({"month": "2026-12", "channel": "audit_trail", "channelVersion": "1"})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    let d = h.run("r-4", json!({"month": "2027-01", "channel": "audit_trail", "channelVersion": 9})).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let error = step(&d, "deliver").last_error.clone().unwrap_or_default();
    assert!(error.contains("audit_trail v9 not found"), "{error}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_workflows_given_inline_are_registered_and_run() {
    let h = Harness::start("gift_wrap.json").await;
    let d = h.run("g-1", json!({"item": "book"})).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output, Some(json!({"wrapped": {"paper": "red for book", "tagged": true}})));
    assert_eq!(h.input_of("write"), json!({"order": "book"}), "the inline definition's own inline child ran");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_defs_retry_and_time_out_as_conductor_s_do() {
    let h = Harness::start("lookup_policies.json").await;
    let d = h.run("l-1", json!({})).await;
    let flaky = step(&d, "flaky");
    assert_eq!((flaky.state, flaky.attempts, flaky.failure_count), (StepState::Processed, 3, 2), "retryCount 2");
    assert_eq!(flaky.output, Some(json!({"found": 3})));
    let retried = d.events.iter().filter(|e| e.step_id == Some(flaky.id) && e.kind == "step.claimed").count();
    assert_eq!(retried, 3);
    // TIME_OUT_WF: the first lapse of its 1 s timeout fails the workflow, without a retry.
    assert_eq!(d.task.state, TaskState::Failed, "{:#?}", d.steps);
    let slow = step(&d, "slow");
    assert_eq!((slow.state, slow.attempts), (StepState::Error, 1), "{slow:#?}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_s_timeout_fails_it_while_it_waits() {
    let h = Harness::start("hold_for_review.json").await;
    let d = h.run("h-1", json!({})).await;
    assert_eq!(d.task.state, TaskState::Failed);
    assert!(d.events.iter().any(|e| e.kind == "task.timed_out"), "{:#?}", d.events);
    assert_eq!(step(&d, "review").state, StepState::Cancelled, "the wait went with it");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_def_s_total_timeout_and_poll_timeout_end_attempts_as_conductor_s_do() {
    let h = Harness::start("ledger_export.json").await;
    let d = h.run("x-1", json!({"month": "2026-10"})).await;
    // totalTimeoutSeconds 3: two 1 s attempts a second apart, and no third (it would be due at 4 s).
    let render = step(&d, "render");
    assert_eq!(render.state, StepState::Error, "{render:#?}");
    assert!((2..=3).contains(&render.attempts), "{render:#?}");
    let gave_up = d.events.iter().find(|e| e.kind == "step.error" && e.step_id == Some(render.id)).unwrap();
    assert_eq!(gave_up.detail["reason"], json!("its total timeout passed"), "{:?}", gave_up.detail);
    // optional: the workflow went on to the archive, which no worker polls for. pollTimeoutSeconds
    // 1 with TIME_OUT_WF: timed out unclaimed, and the workflow fails.
    let archive = step(&d, "archive");
    assert_eq!((archive.state, archive.attempts), (StepState::Error, 0), "{archive:#?}");
    assert!(archive.last_error.as_deref().unwrap_or("").contains("claim timeout"), "{archive:#?}");
    assert_eq!(d.task.state, TaskState::Failed);
    h.stop().await;
}
