//! What every handler shares: the engine (its store, job client and metrics), the auth mode and
//! this process's API metrics.

use crate::auth::Authenticator;
use crate::metrics::ApiMetrics;
use shiftboss_engine::Engine;
use shiftboss_store::Store;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub auth: Arc<Authenticator>,
    pub metrics: Arc<ApiMetrics>,
    /// What the worker protocol's polls share (issue 17).
    pub remote: Arc<crate::routes::agents::RemoteWorkers>,
    /// What Conductor's APIs keep in this process: task definitions, the documents workflows
    /// were registered from.
    pub conductor: Arc<crate::routes::conductor::Registry>,
}

impl AppState {
    pub fn store(&self) -> &Arc<dyn Store> {
        self.engine.store()
    }
}
