//! The worker protocol (issue 17): remote workers in any language poll for the steps of the agent
//! types the server declares remote, heartbeat while they work, and complete or fail each step
//! under its claim's lease token. Every verb is the in-process scheduler's own store verb (the
//! claim, the extension of a lease, the recording of replies), so leases, FailureCount, retry
//! policies, domains, priority order and agent limits apply to remote steps as to any other; the
//! supervisor's sweep takes back the steps of a worker that vanished when their complete-by passes.
//! `docs/worker-protocol.md` is the protocol's page.

mod batch;
pub mod bell;
pub(crate) mod poll;
pub(crate) mod replies;
pub mod wire;
mod workers;

pub use bell::RemoteWorkers;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(poll::poll))
        .routes(routes!(replies::heartbeat))
        .routes(routes!(replies::complete))
        .routes(routes!(replies::fail))
        .routes(routes!(replies::postpone))
        .routes(routes!(batch::replies))
        .routes(routes!(workers::list_workers))
        .routes(routes!(workers::release_worker))
}
