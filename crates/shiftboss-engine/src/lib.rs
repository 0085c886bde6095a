//! The engine: the scheduler, the agent runtime and the supervisor of the Scheduler Agent
//! Supervisor pattern, over any [`shiftboss_store::Store`].
//!
//! Layout:
//! - [`agent`]: the `Agent` trait that wraps one remote service, and the registry of agents.
//! - [`http_agent`]: the built-in agent that calls an HTTP service.
//! - [`outbound`]: every call the engine sends out: the SSRF guard, TLS, secrets, bounds.
//! - [`exception`]: exception strategies: what a handler's error or panic counts as (M5).
//! - [`jobs`]: the client side of retry jobs: enqueue with options and a balance strategy (M1, M3).
//! - [`runtime`]: runs one claimed step: in-call retries with backoff, the circuit breaker, and
//!   dropping the call at complete-by (P4, P5).
//! - [`scheduler`]: claims due steps, hands them to the runtime, writes replies in batches.
//! - [`supervisor`]: the leader-only sweep that retries or gives up steps whose lease lapsed.
//! - [`elector`]: keeps a leader lease for leader-only services.
//! - [`dispatcher`]: the status channels' webhooks: claims the outbox's deliveries, signs and
//!   sends them, records what became of each (P18).
//! - [`alerts`]: the operator's alerts (P16, P17): the log's alert events and tasks without
//!   progress, folded and sent to the configured sinks.
//! - [`group_commit`]: concurrent single submissions and remote replies written a batch at a time.
//! - [`follow`]: reading the event log as it is written: a task's events as a stream, awaiting
//!   its end.
//! - [`engine`]: wiring: the builder, submission, start and shutdown.
//!
//! Architecture invariant: no SQL and no backend types here; every state change goes through the
//! store contract, and every write for a claimed step carries the claim's lease token.

pub mod agent;
pub mod alerts;
pub mod config;
pub mod dispatcher;
pub mod elector;
pub mod engine;
pub mod exception;
pub mod follow;
pub mod group_commit;
pub mod http_agent;
pub mod jobs;
pub mod metrics;
pub mod outbound;
pub mod progress;
pub mod runtime;
pub mod scheduler;
mod slot_limit;
pub mod supervisor;
pub mod throttle;

pub use agent::{Agent, AgentCall, AgentError};
pub use config::{ArchiveConfig, BucketPolicy, EngineConfig, PollMode, Roles, SchedulerConfig, SupervisorConfig};
pub use dispatcher::DispatchConfig;
pub use engine::{Engine, EngineBuilder, EngineError, RunningEngine};
pub use exception::{Exception, ExceptionStrategy, Verdict};
pub use group_commit::SubmitConfig;
pub use group_commit::handoff::Offered;
pub use http_agent::HttpAgent;
pub use jobs::{ClientConfig, HandlerDefaults, JobClient, JobOptions};
pub use outbound::{Outbound, OutboundConfig};
