//! Core NATS sinks against the NATS server on this machine, run through a real engine; and a NATS
//! that is down or silent, which must fail the call transiently, within its bound, naming it.

mod common;

use common::{Harness, NATS_URL, agent, call, nats_is_up, the_step, unique};
use futures_util::StreamExt;
use serde_json::{Value, json};
use shiftboss_core::TaskState;
use shiftboss_engine::agent::Agent;
use shiftboss_engine::{AgentError, OutboundConfig};
use std::time::Duration;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_publishes_on_core_nats_and_completes_with_conductors_output() {
    if !nats_is_up("core NATS").await {
        return;
    }
    let subject = format!("shiftboss.test.{}", unique("core"));
    let listener = async_nats::connect(NATS_URL).await.unwrap();
    let mut received = listener.subscribe(subject.clone()).await.unwrap();
    // The subscription is the server's before anything is published.
    listener.flush().await.unwrap();

    let h = Harness::start(agent(NATS_URL, OutboundConfig::default())).await;
    let sink = format!("nats:{subject}");
    h.register("announce", json!({"sink": sink}), json!({"order": "${task.input.order}", "total": 42})).await.unwrap();
    let d = h.run("announce", "order-1", json!({"order": "A-1"})).await;
    h.stop().await;

    let step = the_step(&d);
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    let msg = tokio::time::timeout(Duration::from_secs(5), received.next())
        .await
        .expect("the message arrives within 5 s")
        .expect("the subscription is open");
    let payload: Value = serde_json::from_slice(&msg.payload).unwrap();
    assert_eq!(payload, json!({"order": "A-1", "total": 42}));
    let id = msg.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id")).map(|v| v.as_str().to_owned());
    assert_eq!(id.as_deref(), Some(step.idempotency_key.as_str()), "the step's key goes as Nats-Msg-Id");
    assert_eq!(
        step.output,
        Some(json!({
            "event_produced": sink,
            "sink": sink,
            "workflowInstanceId": d.task.id.to_string(),
            "payload": {"order": "A-1", "total": 42},
        }))
    );
    // Exactly one message: the step ran once.
    let more = tokio::time::timeout(Duration::from_millis(300), received.next()).await;
    assert!(more.is_err(), "a second message: {more:?}");
}

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_nats_that_is_down_fails_the_call_transiently_naming_the_server() {
    let port = closed_port();
    // Made while NATS is down: serve starts all the same.
    let a = agent(&format!("nats://127.0.0.1:{port}"), OutboundConfig::default());
    for sink in ["nats:orders.created", "jetstream:orders.paid"] {
        let c = call(json!({"sink": sink}), json!({"n": 1}), "key-1", Duration::from_secs(3));
        let start = Instant::now();
        let e = a.call(&c).await.unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(3), "{sink}: took {:?}", start.elapsed());
        match e {
            AgentError::Transient(m) => {
                assert!(m.contains(&format!("127.0.0.1:{port}")) && m.contains("unreachable"), "{sink}: {m}")
            }
            other => panic!("{sink}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_silent_nats_is_waited_for_only_until_the_calls_bound() {
    // Takes connections and never says a word (a NATS server starts with INFO).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            open.push(s);
        }
    });
    let a = agent(&format!("nats://{addr}"), OutboundConfig::default());
    // The step's own bound, well within its complete-by.
    let c = call(json!({"sink": "nats:orders.created", "timeout_ms": 400}), json!({}), "k", Duration::from_secs(20));
    let start = Instant::now();
    let e = a.call(&c).await.unwrap_err();
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(350) && took < Duration::from_secs(2), "took {took:?}");
    match e {
        AgentError::Transient(m) => assert!(m.contains(&addr.to_string()), "{m}"),
        other => panic!("{other:?}"),
    }
    // And the complete-by, when it comes first.
    let c = call(json!({"sink": "jetstream:orders.paid"}), json!({}), "k", Duration::from_millis(500));
    let start = Instant::now();
    let e = a.call(&c).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());
    assert!(matches!(e, AgentError::Transient(_)), "{e:?}");
    held.abort();
}
