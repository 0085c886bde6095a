//! The pure core of shiftboss: the domain model and every rule that needs no I/O.
//!
//! Layout:
//! - [`time`]: timestamps and durations as the state store keeps them (milliseconds).
//! - [`ids`]: typed ids for tasks, steps, lease tokens and instances.
//! - [`state`]: the step and task state machines; every store applies these transitions.
//! - [`retry`]: retry policies as data (interval lists, exponential with a cap) used by the supervisor.
//! - [`backoff`]: the short in-call backoff an agent runtime uses before complete-by.
//! - [`breaker`]: a circuit breaker driven by an explicit clock.
//! - [`buckets`]: load-balance buckets and how live schedulers share them (M3).
//! - [`workflow`]: workflow definitions and their validation.
//! - [`expr`]: the small, safe expression language of definitions (`${charge.output.id}`).
//! - [`decider`]: from a definition and a task's steps, what to do next.
//! - [`jobs`]: retry jobs: one handler call retried on a schedule, as a one-step task (M1-M8).
//! - [`model`]: the records a state store hands out (tasks, steps, events).
//! - [`token`]: API tokens' scopes, secrets and the hash the store keeps of them.
//!
//! Architecture invariant: this crate does no I/O and needs no async runtime; time and randomness
//! come in as arguments, so every rule here is testable with plain values. The one exception is
//! [`token::mint_secret`], which reads the operating system's random source (a secret must not be
//! the caller's choice).

pub mod backoff;
pub mod breaker;
pub mod buckets;
pub mod decider;
pub mod expr;
pub mod idempotency;
pub mod ids;
pub mod jobs;
pub mod model;
pub mod retry;
pub mod state;
pub mod time;
pub mod token;
pub mod workflow;

pub use ids::{InstanceId, LeaseToken, StepId, TaskId};
pub use state::{StepState, TaskState};
pub use time::Timestamp;
