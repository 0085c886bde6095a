//! jq filters, run by jaq in worker processes.

pub mod filter;
pub mod pool;
pub mod worker;

pub use pool::{JqLimits, JqPool, WorkerCommand};
