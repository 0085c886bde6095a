//! JetStream sinks against the NATS server on this machine: a retried attempt (the same
//! idempotency key) is stored once, and a subject that no stream captures fails for good.

mod common;

use async_nats::jetstream;
use common::{NATS_URL, agent, call, nats_is_up, unique};
use futures_util::FutureExt;
use serde_json::{Value, json};
use shiftboss_engine::agent::Agent;
use shiftboss_engine::{AgentError, OutboundConfig};
use std::panic::AssertUnwindSafe;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_publish_is_stored_once() {
    if !nats_is_up("JetStream").await {
        return;
    }
    let js = jetstream::new(async_nats::connect(NATS_URL).await.unwrap());
    let name = unique("SHIFTBOSS_TEST");
    let subject = format!("shiftboss.test.{name}");
    let config = jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        // Whatever a failed run leaves behind goes soon.
        max_age: Duration::from_secs(600),
        ..Default::default()
    };
    let mut stream = js.create_stream(config).await.unwrap();

    let checks = AssertUnwindSafe(async {
        let a = agent(NATS_URL, OutboundConfig::default());
        let sink = format!("jetstream:{subject}");
        let input = json!({"order": "A-7", "paid": true});
        let first = call(json!({"sink": sink}), input.clone(), "task-1:pay:1", Duration::from_secs(10));
        let out1 = a.call(&first).await.unwrap();
        // The attempt again, as after a lost ack or a crash before the reply was written.
        let again = call(json!({"sink": sink}), input.clone(), "task-1:pay:1", Duration::from_secs(10));
        let out2 = a.call(&again).await.unwrap();

        assert_eq!(out1["event_produced"], json!(sink));
        assert_eq!(out1["workflowInstanceId"], json!("41"));
        assert_eq!(out1["payload"], input);
        assert_eq!(out1["ack"], json!({"stream": name, "sequence": 1, "duplicate": false}));
        assert_eq!(out2["ack"], json!({"stream": name, "sequence": 1, "duplicate": true}));
        assert_eq!(stream.info().await.unwrap().state.messages, 1, "the stream holds the message once");
        let stored = stream.get_raw_message(1).await.unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&stored.payload).unwrap(), input);
        assert_eq!(stored.headers.get("Nats-Msg-Id").map(|v| v.as_str()), Some("task-1:pay:1"));

        // Another step's key is another message: the stream drops by key, not everything.
        let other = call(json!({"sink": sink}), input.clone(), "task-2:pay:1", Duration::from_secs(10));
        let out3 = a.call(&other).await.unwrap();
        assert_eq!(out3["ack"]["sequence"], json!(2));
        assert_eq!(stream.info().await.unwrap().state.messages, 2);
    })
    .catch_unwind()
    .await;
    js.delete_stream(&name).await.unwrap();
    if let Err(panic) = checks {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test]
async fn a_subject_no_stream_captures_fails_for_good_saying_so() {
    if !nats_is_up("JetStream without a stream").await {
        return;
    }
    let subject = format!("shiftboss.test.{}", unique("nostream"));
    let a = agent(NATS_URL, OutboundConfig::default());
    let c = call(json!({"sink": format!("jetstream:{subject}")}), json!({}), "k", Duration::from_secs(10));
    match a.call(&c).await {
        Err(AgentError::Permanent(m)) => {
            assert!(m.contains("no JetStream stream") && m.contains(&subject), "{m}");
        }
        other => panic!("{other:?}"),
    }
}
