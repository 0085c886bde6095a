//! jq filters, run by jaq in worker processes.

pub mod filter;
pub mod pool;
pub mod worker;

pub use pool::{JqLimits, JqPool, WorkerCommand};

/// The first argument that makes a binary a jq worker (`shiftboss __jq-worker MEMORY OUTPUT`).
pub const WORKER_SUBCOMMAND: &str = "__jq-worker";
