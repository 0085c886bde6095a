//! Workflows through the whole engine on a SQLite file: a Conductor definition imported as a team
//! would bring it, run by a scheduler and its agents to the result Conductor would give; and a
//! task undone by its compensations when a later step is refused.

use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_conductor::from_conductor;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskId, TaskState};
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig, Roles};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask, TaskDetail};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An in-process agent that answers from a function of the call, and records what it was given.
struct Scripted {
    answer: fn(&AgentCall) -> Result<Value, AgentError>,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
}

#[async_trait]
impl Agent for Scripted {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        self.calls.lock().unwrap().push((call.step.clone(), call.input.clone()));
        (self.answer)(call)
    }
}

fn config() -> EngineConfig {
    let mut c = EngineConfig { roles: Roles::default(), ..EngineConfig::default() };
    c.scheduler.poll_interval = Duration::from_millis(20);
    c.supervisor.interval = Duration::from_millis(50);
    c.supervisor.reconcile_interval = Duration::from_millis(50);
    c
}

/// Waits until the task has ended (it is decided in the engine's own transactions).
async fn ended(store: &dyn Store, task: TaskId) -> TaskDetail {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = store.get_task(task).await.unwrap().unwrap();
        if d.task.state.is_terminal() {
            return d;
        }
        assert!(Instant::now() < deadline, "task {task} still {} after 20 s: {:#?}", d.task.state, d.steps);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn submit(key: &str, workflow: &str, input: Value) -> SubmitTask {
    SubmitTask {
        correlation_id: None,
        domains: Default::default(),
        notify: None,
        key: key.into(),
        workflow: workflow.into(),
        version: None,
        input,
        priority: 0,
        actor: "test".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_definition_runs_to_the_result_conductor_would_give() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/conductor/order_fulfillment.json"
    ))
    .unwrap();
    let import = from_conductor(&text).expect("the documented example imports");
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let agent = |answer| Scripted { answer, calls: calls.clone() };
    let engine = Engine::builder(store.clone(), InstanceId::new("e1").unwrap())
        .agent("validate_order", agent(|_| Ok(json!({"total": 42.5}))))
        .agent(
            "charge_payment",
            agent(|c| Ok(json!({"paymentId": format!("pay-{}", c.input["orderId"].as_str().unwrap())}))),
        )
        .agent("ship_express", agent(|_| Ok(json!({"tracking": "EX1"}))))
        .agent("ship_standard", agent(|_| Ok(json!({"tracking": "ST1"}))))
        // Conductor's HTTP task: the notifier answers the way Conductor's HTTP task reports a body.
        .agent("http", agent(|_| Ok(json!({"response": {"statusCode": 200, "body": {"accepted": true}}}))))
        .config(config())
        .build()
        .unwrap();
    engine.register_workflow(&import.workflow).await.expect("the imported definition registers");
    let running = engine.start();

    let express =
        engine.submit(submit("o-1", &import.workflow.name, json!({"orderId": "A1", "shippingMethod": "express"})));
    let express = express.await.unwrap().task_id;
    let d = ended(store.as_ref(), express).await;
    assert_eq!(d.task.state, TaskState::Completed);
    assert_eq!(d.task.output, Some(json!({"orderId": "A1", "paymentId": "pay-A1", "notified": true})));
    let charge = calls.lock().unwrap().iter().find(|(s, _)| s == "charge").cloned().expect("charge ran");
    assert_eq!(charge.1["amount"], json!(42.5), "${{validate.output.total}} flowed into the charge");

    let pickup =
        engine.submit(submit("o-2", &import.workflow.name, json!({"orderId": "B2", "shippingMethod": "pickup"})));
    let d = ended(store.as_ref(), pickup.await.unwrap().task_id).await;
    assert_eq!(d.task.state, TaskState::Completed, "the pickup case terminates as completed");
    let after = ["ship_express", "ship_standard", "notify"];
    assert!(!d.steps.iter().any(|s| after.contains(&s.name.as_str())), "nothing after the terminate: {:#?}", d.steps);
    assert_eq!(d.task.output.as_ref().and_then(|o| o.get("orderId")), Some(&json!("B2")), "its workflowOutput");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_step_undoes_the_completed_ones_through_the_engine() {
    let def = WorkflowDef::from_yaml(
        r#"
name: trip
steps:
  - name: hotel
    agent: booking
    compensate: {name: cancel_hotel, agent: booking}
  - name: flight
    agent: booking
    compensate: {name: cancel_flight, agent: booking, input: {ref: "${flight.output.ref}"}}
  - name: car
    agent: booking
"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let booking = Scripted {
        answer: |c| match c.step.as_str() {
            "car" => Err(AgentError::Permanent("no cars left".into())),
            step => Ok(json!({"ref": format!("{step}-1")})),
        },
        calls: calls.clone(),
    };
    let engine = Engine::builder(store.clone(), InstanceId::new("e1").unwrap())
        .agent("booking", booking)
        .config(config())
        .build()
        .unwrap();
    engine.register_workflow(&def).await.unwrap();
    let running = engine.start();
    let task = engine.submit(submit("t-1", "trip", json!({"who": "ann"}))).await.unwrap().task_id;
    let d = ended(store.as_ref(), task).await;
    running.shutdown().await;
    assert_eq!(d.task.state, TaskState::Compensated);
    let order: Vec<String> = calls.lock().unwrap().iter().map(|(s, _)| s.clone()).collect();
    assert_eq!(order, ["hotel", "flight", "car", "cancel_flight", "cancel_hotel"], "undone newest first");
    let cancel_flight = calls.lock().unwrap().iter().find(|(s, _)| s == "cancel_flight").unwrap().1.clone();
    assert_eq!(cancel_flight, json!({"ref": "flight-1"}));
}
