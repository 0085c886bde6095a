//! Bad event steps are refused when their workflow is registered with a real engine, with a
//! message naming the sink and what is supported; good ones register. No NATS is needed: the
//! agent connects only when a step runs.

mod common;

use common::{Harness, agent};
use serde_json::{Value, json};
use shiftboss_engine::OutboundConfig;

#[tokio::test]
async fn bad_sinks_are_refused_at_registration_and_good_ones_register() {
    // A NATS address nothing listens on: registration must not need it.
    let h = Harness::start(agent("nats://127.0.0.1:1", OutboundConfig::default())).await;
    let refused: &[(Value, &[&str])] = &[
        (
            json!({"sink": "sqs:send_email_queue"}),
            &["sqs:send_email_queue", "\"sqs\" sinks are not supported", "jetstream:<subject>"],
        ),
        (json!({"sink": "kafka:orders"}), &["kafka:orders", "not supported", "webhook:<url>"]),
        (json!({"sink": "conductor:wf:queue"}), &["conductor:wf:queue", "not supported"]),
        (json!({"sink": "conductor"}), &["\"conductor\"", "kind:where"]),
        (json!({"sink": "nats:"}), &["\"nats:\"", "is empty"]),
        (json!({"sink": "nats:orders created"}), &["orders created", "space"]),
        (json!({"sink": "nats:orders.*"}), &["orders.*", "wildcard"]),
        (json!({"sink": "jetstream:orders.>"}), &["orders.>", "wildcard"]),
        (json!({"sink": "nats:orders..paid"}), &["orders..paid", "empty token"]),
        (
            json!({"sink": "webhook:ftp://files.example/in"}),
            &["webhook:ftp://files.example/in", "only http:// and https://"],
        ),
        (json!({"sink": "webhook:not a url"}), &["webhook:not a url", "invalid url"]),
        (
            json!({"sink": "webhook:https://h.example/x", "headers": {"bad header": "v"}}),
            &["webhook:https://h.example/x", "invalid header name"],
        ),
        (json!({"sink": "webhook:https://h.example/x", "headers": {"a": "${secret.bad-name}"}}), &["secret reference"]),
        (json!({"sink": "nats:orders", "headers": {"a": "b"}}), &["nats:orders", "webhook sinks only"]),
        (json!({"sink": "nats:${task.input.subject}"}), &["static"]),
        (json!({"sink": "nats:orders", "timeout_ms": 0}), &["timeout_ms"]),
        (json!({"sink": "nats:orders", "sinks": "x"}), &["unknown field `sinks`"]),
        (json!({}), &["missing field `sink`"]),
    ];
    for (i, (config, says)) in refused.iter().enumerate() {
        let e = h.register(&format!("bad_{i}"), config.clone(), json!({})).await.unwrap_err();
        for s in *says {
            assert!(e.contains(s), "{config}: {e:?} does not say {s:?}");
        }
    }
    for (i, config) in [
        json!({"sink": "nats:orders.created"}),
        json!({"sink": "jetstream:orders.paid", "timeout_ms": 2000}),
        json!({"sink": "webhook:https://hooks.example.com/in", "headers": {"authorization": "Bearer ${secret.HOOK}"}}),
    ]
    .into_iter()
    .enumerate()
    {
        h.register(&format!("good_{i}"), config.clone(), json!({})).await.unwrap_or_else(|e| panic!("{config}: {e}"));
    }
    h.stop().await;
}
