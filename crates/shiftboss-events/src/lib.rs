//! The `event` agent: publishes a step's input as a message, as Conductor's EVENT task does
//! (issue 21). `serve` registers it under [`EVENT_AGENT`]; the core and the engine stay free of
//! any message broker.
//!
//! A step names where the message goes in its static config, `{"sink": "<sink>"}`:
//!
//! - `nats:<subject>`: a core NATS publish, flushed, so the server has it when the step completes.
//!   Core NATS keeps nothing: a subscriber that is not listening misses it, and a retried attempt
//!   publishes again (at least once).
//! - `jetstream:<subject>`: a JetStream publish, complete once the stream acknowledges it (it is
//!   then stored). The step's idempotency key goes as the `Nats-Msg-Id` header, so a retried
//!   attempt within the stream's duplicate window is dropped by the stream. A subject that no
//!   stream captures is a permanent error.
//! - `webhook:<url>`: a POST of the message as JSON, made by the engine's HTTP agent through
//!   [`Outbound`](shiftboss_engine::Outbound): the SSRF guard and its allow-list, TLS, secrets in
//!   `headers` (`${secret.NAME}`), the bounds, the `Idempotency-Key` header and the sorting of
//!   answers into transient and permanent faults are the HTTP agent's own.
//!
//! Other settings: `headers` (webhook only) and `timeout_ms`, a bound on the whole call within the
//! step's complete-by. Every wait on NATS (connect, publish, ack, flush) is bounded too. Any other
//! sink is refused when the workflow is registered, naming the sinks supported.
//!
//! The output, as Conductor's EVENT task gives it: `{"event_produced": <sink>, "sink": <sink>,
//! "workflowInstanceId": <task id as text>, "payload": <the message>}`, and for JetStream an
//! `ack` with the stream, its sequence number and whether the stream found a duplicate.
//!
//! Where shiftboss differs from Conductor:
//! - The message is the step's input as it is: Conductor adds `workflowInstanceId`,
//!   `workflowType`, `workflowVersion` and `correlationId` to it; here the step's input template
//!   adds what the receiver needs (`${task.id}`...).
//! - `workflowType`, `workflowVersion` and `correlationId` are not in the output: an agent call
//!   does not carry the workflow's name or version, and tasks have keys, not correlation ids.
//! - Sinks: NATS, JetStream and webhooks. Conductor's `conductor`, `sqs`, `kafka`, `amqp*` and
//!   `nats-stream` (NATS Streaming, retired upstream) are refused; its `nats:` sink maps as it is.
//! - No `asyncComplete`: a step that waits for an answer is a separate wait step.
//!
//! - [`sink`]: the sink's text, parsed and checked.
//! - [`step_config`]: a step's whole config.
//! - [`nats`]: the one NATS connection of an agent, made on first use, and its bounded publishes.
//! - [`webhook`]: the webhook sink, through the HTTP agent.
//! - [`agent`]: the agent, its settings and its output.

pub mod agent;
pub mod nats;
pub mod sink;
pub mod step_config;
pub mod webhook;

pub use agent::{EventAgent, EventsConfig};
pub use sink::Sink;

/// The name `serve` registers the agent under, which steps name (`"agent": "event"`).
pub const EVENT_AGENT: &str = "event";

/// Where the NATS server is when the config file names none.
pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";
