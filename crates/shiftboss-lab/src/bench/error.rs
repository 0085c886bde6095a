//! What can stop a benchmark from producing a figure.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The work did not finish in time: the figure would be a lie, so there is none.
    #[error("{what}: not done after {after:?} ({done} of {total})")]
    Timeout { what: &'static str, after: Duration, done: u64, total: u64 },
    /// Nothing was measured (no call arrived, no step recovered).
    #[error("{0}: nothing was measured")]
    NoSamples(&'static str),
    /// The workload needs the other kind of store.
    #[error("this workload runs on {0} only")]
    WrongStore(&'static str),
    /// The recovery round's victim process did not behave as planned.
    #[error("recovery victim: {0}")]
    Victim(String),
}
