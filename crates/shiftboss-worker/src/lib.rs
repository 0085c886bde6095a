//! A remote worker for shiftboss, in Rust (issue 17): the client side of the worker protocol
//! (`docs/worker-protocol.md`).
//!
//! ```ignore
//! let config = WorkerConfig::new("http://127.0.0.1:8080", token, "ship-host1", ["ship"]);
//! let worker = Worker::new(config, ShipHandler)?;
//! worker.run(tokio::signal::ctrl_c()).await?;   // stops polling, finishes what it holds
//! ```
//!
//! - [`config`]: where the server is, who the worker is, how many steps it runs at once.
//! - [`protocol`]: the JSON the worker protocol speaks.
//! - [`client`]: one call per route, bounded, with typed errors.
//! - [`worker`]: the poll loop, a task per step, heartbeats, shutdown.
//! - `replier`: the fenced replies, sent in batches while the last batch is on the way.

pub mod client;
pub mod config;
pub mod protocol;
mod replier;
pub mod worker;

pub use client::{Client, ClientError};
pub use config::WorkerConfig;
pub use protocol::Step;
pub use worker::{Failure, Handler, Worker, WorkerStats};
