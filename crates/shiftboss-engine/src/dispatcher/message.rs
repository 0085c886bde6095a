//! What a delivery sends: the message as JSON, the same bytes at every attempt.
//!
//! `{"type": KIND, "timestamp": RFC 3339, "data": {...}}` (the Standard Webhooks payload shape),
//! `data` holding the task's key (the application's own id), its id, the workflow and version,
//! the task's state, the message's `seq` (1, 2, 3... per task, in the order things happened),
//! the event's id, and the step, output and error where there are.

use serde_json::{Map, Value, json};
use shiftboss_store::DeliveryRecord;

/// The id every attempt of a delivery carries (`webhook-id`), for the receiver to drop repeats.
pub fn message_id(d: &DeliveryRecord) -> String {
    format!("msg_{}", d.id)
}

/// The body, as bytes to sign and send.
pub fn body(d: &DeliveryRecord) -> Vec<u8> {
    let mut data = Map::new();
    data.insert("task_id".into(), json!(d.task_id.to_string()));
    data.insert("key".into(), json!(d.task_key));
    data.insert("workflow".into(), json!(d.workflow));
    data.insert("version".into(), json!(d.version));
    data.insert("state".into(), json!(d.task_state));
    data.insert("seq".into(), json!(d.seq));
    data.insert("event_id".into(), json!(d.event_id.to_string()));
    if let Some(step) = &d.step {
        data.insert("step".into(), json!(step));
    }
    if let Some(out) = &d.output {
        // Stored as JSON text by the engine; kept as text should it ever not parse.
        let v = serde_json::from_str::<Value>(out).unwrap_or_else(|_| Value::String(out.clone()));
        data.insert("output".into(), v);
    }
    if let Some(e) = &d.error {
        data.insert("error".into(), json!(e));
    }
    let msg = json!({"type": d.kind.as_str(), "timestamp": d.at.to_string(), "data": data});
    msg.to_string().into_bytes()
}
