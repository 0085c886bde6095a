//! What every handler shares: the engine (its store, job client and metrics), the auth mode and
//! this process's API metrics.

use crate::auth::Authenticator;
use crate::metrics::ApiMetrics;
use shiftboss_engine::{Engine, EngineError};
use shiftboss_store::{Store, SubmitTask, Submitted};
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub auth: Arc<Authenticator>,
    pub metrics: Arc<ApiMetrics>,
    /// What the worker protocol's polls share (issue 17).
    pub remote: Arc<crate::routes::agents::RemoteWorkers>,
    /// A permit per open event stream (`Limits::streams`).
    pub streams: Arc<tokio::sync::Semaphore>,
    pub limits: crate::limits::Limits,
    /// The console's charts: this process's rates, sampled while it runs.
    pub charts: Arc<crate::console::charts::Samples>,
}

impl AppState {
    pub fn store(&self) -> &Arc<dyn Store> {
        self.engine.store()
    }

    /// Submits through the engine (group commit), then rings this process's waiting worker polls
    /// at once: the store's channel would ring them too, a round trip later.
    pub async fn submit(&self, task: SubmitTask) -> Result<Submitted, EngineError> {
        let s = self.engine.submit(task).await?;
        self.remote.ring();
        Ok(s)
    }

    /// Many tasks in one transaction, as [`AppState::submit`] does one.
    pub async fn submit_many(&self, tasks: Vec<SubmitTask>) -> Result<Vec<Submitted>, EngineError> {
        let s = self.engine.submit_many(tasks).await?;
        self.remote.ring();
        Ok(s)
    }
}
