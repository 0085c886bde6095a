//! Params and records of the remote worker registry (issue 17): which workers polled for which
//! agent type, and when last. The API writes it as workers poll (at most every few seconds per
//! worker, so a busy poller costs the store little), and reads it for operators. It lives in the
//! store, not in one process's memory, so that every serve process answers the same.

use crate::StoreError;
use shiftboss_core::Timestamp;
use shiftboss_core::workflow::check_name;
use std::time::Duration;

/// The longest worker id accepted, in bytes.
pub const MAX_WORKER_ID_LEN: usize = 100;

/// The most (agent type, worker) pairs one report takes.
pub const MAX_WORKERS_SEEN: usize = 1000;

/// Workers seen polling now, by the store's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkersSeen {
    /// Each worker, with the agent types it polled for.
    pub seen: Vec<WorkerSeen>,
    /// Rows not seen for this long are deleted in the same transaction, so that workers that
    /// take a new id at every start (a host name and a process id) do not grow the table for ever.
    pub forget_after: Duration,
}

/// One worker polling for one agent type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSeen {
    /// The agent type it polled for.
    pub agent: String,
    /// The id the worker gives itself: 1 to [`MAX_WORKER_ID_LEN`] visible ASCII characters.
    pub worker: String,
}

impl WorkersSeen {
    /// Checks what does not need the database; stores call it before they write.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.seen.len() > MAX_WORKERS_SEEN {
            return Err(StoreError::InvalidInput(format!("at most {MAX_WORKERS_SEEN} workers in one report")));
        }
        for s in &self.seen {
            check_name("agent", &s.agent).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
            check_worker_id(&s.worker)?;
        }
        Ok(())
    }
}

/// A worker id: 1 to [`MAX_WORKER_ID_LEN`] visible ASCII characters (no spaces), as an instance id.
pub fn check_worker_id(id: &str) -> Result<(), StoreError> {
    if id.is_empty() || id.len() > MAX_WORKER_ID_LEN || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(StoreError::InvalidInput(format!(
            "a worker id must be 1 to {MAX_WORKER_ID_LEN} visible ASCII characters, no spaces"
        )));
    }
    Ok(())
}

/// The instance a remote worker's claims are held under, `worker:<id>`, for a valid worker id.
pub fn worker_instance(id: &str) -> Result<shiftboss_core::InstanceId, StoreError> {
    check_worker_id(id)?;
    shiftboss_core::InstanceId::new(format!("worker:{id}")).map_err(|e| StoreError::InvalidInput(e.to_string()))
}

/// A worker as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentWorker {
    /// The agent type it polled for.
    pub agent: String,
    /// The worker's id.
    pub worker: String,
    /// When it first polled for this agent type (since its row was last forgotten).
    pub first_seen_at: Timestamp,
    /// When it last polled for it, to within the API's write interval.
    pub last_seen_at: Timestamp,
}
