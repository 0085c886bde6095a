//! The event agent: a step's input published to its sink, and Conductor's EVENT output.

use crate::nats::{Ack, BadUrl, Nats, NatsError};
use crate::sink::Sink;
use crate::step_config::StepConfig;
use crate::webhook::Webhook;
use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_core::workflow::StepDef;
use shiftboss_engine::Outbound;
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use std::time::Duration;
use tokio::time::Instant;

/// The agent's settings (the config file's `[events]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsConfig {
    /// The NATS server of `nats:` and `jetstream:` sinks (credentials may be in it).
    pub nats_url: String,
    /// The longest making the connection may take.
    pub connect_timeout: Duration,
    /// The longest any one wait on NATS (publish, flush, ack) may take.
    pub timeout: Duration,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            nats_url: crate::DEFAULT_NATS_URL.to_owned(),
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
        }
    }
}

pub struct EventAgent {
    nats: Nats,
    webhook: Webhook,
}

impl EventAgent {
    /// Checks the settings; connects to NATS only when a step first needs it, so that a NATS
    /// that is down stops no process from starting. Webhooks go out through `outbound`.
    pub fn new(config: &EventsConfig, outbound: Outbound) -> Result<EventAgent, BadUrl> {
        let nats = Nats::new(&config.nats_url, config.connect_timeout, config.timeout)?;
        Ok(EventAgent { nats, webhook: Webhook::new(outbound) })
    }
}

#[async_trait]
impl Agent for EventAgent {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        // A config that passed the check at registration cannot fail here; one edited by hand in
        // the database can, and that will not pass by retrying.
        let cfg = StepConfig::parse(&call.config).map_err(|e| AgentError::Permanent(e.to_string()))?;
        let end = match cfg.timeout {
            Some(t) => call.deadline.min(Instant::now() + t),
            None => call.deadline,
        };
        let payload = serde_json::to_vec(&call.input)
            .map_err(|e| AgentError::Permanent(format!("the step's input is not JSON: {e}")))?;
        let key = &call.idempotency_key;
        let ack = match &cfg.sink {
            Sink::Nats(subject) => {
                self.nats.publish(subject, key, payload, end).await.map_err(nats_error)?;
                None
            }
            Sink::JetStream(subject) => {
                Some(self.nats.publish_durable(subject, key, payload, end).await.map_err(nats_error)?)
            }
            Sink::Webhook(url) => {
                self.webhook.post(call, url, &cfg.headers, cfg.timeout).await?;
                None
            }
        };
        Ok(output(call, &cfg.sink, ack))
    }

    fn check_config(&self, step: &StepDef) -> Result<(), String> {
        let cfg = StepConfig::parse(&step.config).map_err(|e| e.to_string())?;
        if let Sink::Webhook(url) = &cfg.sink {
            self.webhook
                .check(step, url, &cfg.headers)
                .map_err(|e| format!("event agent config: sink {:?}: {e}", cfg.sink.to_string()))?;
        }
        Ok(())
    }

    /// NATS is one service whatever the subject; each webhook host is one of its own, so that a
    /// dead receiver does not hold back the others.
    fn service(&self, config: &Value) -> Option<String> {
        match StepConfig::parse(config).ok()?.sink {
            Sink::Nats(_) | Sink::JetStream(_) => Some(format!("nats:{}", self.nats.server())),
            Sink::Webhook(url) => self.webhook.service(&url).map(|s| format!("webhook:{s}")),
        }
    }
}

fn nats_error(e: NatsError) -> AgentError {
    if e.is_transient() { AgentError::Transient(e.to_string()) } else { AgentError::Permanent(e.to_string()) }
}

/// Conductor's EVENT output, and a JetStream publish's acknowledgement.
fn output(call: &AgentCall, sink: &Sink, ack: Option<Ack>) -> Value {
    let sink = sink.to_string();
    let mut out = json!({
        "event_produced": sink,
        "sink": sink,
        "workflowInstanceId": call.task_id.to_string(),
        "payload": call.input,
    });
    if let Some(ack) = ack {
        out["ack"] = json!({"stream": ack.stream, "sequence": ack.sequence, "duplicate": ack.duplicate});
    }
    out
}
