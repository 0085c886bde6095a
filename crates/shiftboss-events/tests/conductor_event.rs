//! Conductor's EVENT task, written in Conductor's JSON, imported and run end to end: its message
//! reaches a NATS subscriber with the task's input parameters, and the workflow reads the task's
//! output as Conductor's.

mod common;

use common::{Harness, NATS_URL, agent, nats_is_up};
use futures_util::StreamExt;
use serde_json::{Value, json};
use shiftboss_core::TaskState;
use shiftboss_engine::OutboundConfig;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_event_task_publishes_its_input_to_nats() {
    if !nats_is_up("a Conductor EVENT task").await {
        return;
    }
    // The corpus's definition (`shiftboss-scripts/tests/conductor/`), whose subject no other test uses.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shiftboss-scripts/tests/conductor/order_events.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let subject = "shiftboss.test.order_events".to_owned();
    let listener = async_nats::connect(NATS_URL).await.unwrap();
    let mut received = listener.subscribe(subject.clone()).await.unwrap();
    listener.flush().await.unwrap();

    let import = shiftboss_conductor::from_conductor(&doc.to_string()).expect("an EVENT task imports");
    let h = Harness::start(agent(NATS_URL, OutboundConfig::default())).await;
    h.register_def(&import.workflow).await.unwrap();
    let d = h.run("order_events", "oe-1", json!({"orderId": "A-7"})).await;
    h.stop().await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    let msg = tokio::time::timeout(Duration::from_secs(5), received.next()).await.expect("within 5 s").unwrap();
    let payload: Value = serde_json::from_slice(&msg.payload).unwrap();
    assert_eq!(payload, json!({"orderId": "A-7", "kind": "created"}));
    assert_eq!(
        d.task.output,
        Some(json!({"sent": format!("nats:{subject}"), "payload": {"orderId": "A-7", "kind": "created"}}))
    );

    // A sink shiftboss has no way to reach is refused at import, at its place.
    let mut sqs = doc.clone();
    sqs["tasks"][0]["sink"] = json!("sqs:orders");
    let e = shiftboss_conductor::from_conductor(&sqs.to_string()).unwrap_err();
    assert_eq!(e.path, "tasks[0].sink", "{e}");
}
