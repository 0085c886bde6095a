//! Conductor definitions with scripted tasks (INLINE with both evaluators, LAMBDA, a JavaScript
//! SWITCH, a JavaScript loopCondition, JSON_JQ_TRANSFORM), written in Conductor's JSON, imported,
//! and run end to end by an engine on a SQLite file, with in-process agents standing in for the
//! SIMPLE workers and the real `inline` and `jq` agents; each ends in the state and output that
//! Conductor documents. And the sandbox's limits, seen from a task: a script that loops, grows
//! without end or reaches for I/O, or a filter that fails, fails its task with a clear error, and
//! the engine goes on with the next task.

use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_conductor::from_conductor;
use shiftboss_core::{InstanceId, StepState, TaskId, TaskState};
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig, Roles, RunningEngine};
use shiftboss_scripts::jq::{JqLimits, WorkerCommand};
use shiftboss_scripts::js::JsLimits;
use shiftboss_scripts::{InlineAgent, JqAgent};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask, TaskDetail};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A SIMPLE worker standing in: answers from a function of the call, and records its inputs.
struct Worker {
    answer: Answer,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
}

#[async_trait]
impl Agent for Worker {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        self.calls.lock().unwrap().push((call.step.clone(), call.input.clone()));
        Ok((self.answer)(call))
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    engine: Engine,
    running: Option<RunningEngine>,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    workflow: String,
}

/// How a stand-in worker answers a call.
type Answer = fn(&AgentCall) -> Value;

const WORKERS: &[(&str, Answer)] = &[
    ("load_cart", |_| json!({"lines": [{"unit": 40, "qty": 2}, {"unit": 25, "qty": 1}]})),
    ("bill_customer", |c| json!({"invoiceId": format!("INV-{}", c.input["amount"])})),
    ("record_grade", |_| json!({"saved": true})),
    ("book_freight", |_| json!({"carrier": "rail"})),
    ("ship_domestic", |_| json!({"carrier": "usps"})),
    ("ship_abroad", |_| json!({"carrier": "dhl"})),
    ("start_export", |_| json!({"exportId": "EX-7"})),
    // Ready on the third check.
    ("check_export", |c| json!({"status": if c.input["attempt"] == json!(3) { "READY" } else { "RUNNING" }})),
    ("list_users", |_| {
        json!({"people": [
            {"id": 1, "first": "Ann", "last": "Lee", "email": "ann@example.com", "active": true},
            {"id": 2, "first": "Bo", "last": "Kim", "email": "bo@example.com", "active": false},
            {"id": 3, "first": "Cy", "last": "Ng", "email": "cy@example.com", "active": true}
        ]})
    }),
    ("prepare", |_| json!({})),
];

impl Harness {
    async fn start(file: &str) -> Harness {
        let path = format!("{}/tests/conductor/{file}", env!("CARGO_MANIFEST_DIR"));
        let import = from_conductor(&std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{file}: {e}"));
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut config = EngineConfig { roles: Roles::default(), ..EngineConfig::default() };
        config.scheduler.poll_interval = Duration::from_millis(20);
        config.supervisor.interval = Duration::from_millis(50);
        config.supervisor.reconcile_interval = Duration::from_millis(50);
        let js = JsLimits { time: Duration::from_millis(300), memory: 16 << 20, ..JsLimits::default() };
        let worker = WorkerCommand { program: env!("CARGO_BIN_EXE_shiftboss-jq-worker").into(), args: vec![] };
        let mut builder = Engine::builder(store.clone(), InstanceId::new("e1").unwrap())
            .agent("inline", InlineAgent::new(js, 2))
            .agent("jq", JqAgent::new(worker, JqLimits::default()))
            .config(config);
        for (name, answer) in WORKERS {
            builder = builder.agent(*name, Worker { answer: *answer, calls: calls.clone() });
        }
        let engine = builder.build().unwrap();
        engine.register_workflow(&import.workflow).await.expect("the imported definition registers");
        let running = Some(engine.start());
        Harness { _dir: dir, store, engine, running, calls, workflow: import.workflow.name }
    }

    async fn run(&self, key: &str, input: Value) -> TaskDetail {
        let submit = SubmitTask {
            notify: None,
            key: key.into(),
            workflow: self.workflow.clone(),
            version: None,
            input,
            priority: 0,
            actor: "test".into(),
        };
        let id: TaskId = self.engine.submit(submit).await.unwrap().task_id;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let d = self.store.get_task(id).await.unwrap().unwrap();
            if d.task.state.is_terminal() {
                return d;
            }
            assert!(Instant::now() < deadline, "task {id} still {} after 20 s: {:#?}", d.task.state, d.steps);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn input_of(&self, step: &str) -> Value {
        let calls = self.calls.lock().unwrap();
        calls.iter().rev().find(|(s, _)| s == step).map(|c| c.1.clone()).unwrap_or_else(|| panic!("{step} ran"))
    }

    async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

fn step<'a>(d: &'a TaskDetail, name: &str) -> &'a shiftboss_core::model::StepRecord {
    d.steps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no step {name}: {:#?}", d.steps))
}

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
