//! Conductor's APIs (issue 17), with Conductor's paths under `/api`, its JSON shapes, enum names
//! and status codes, so that workers and clients written with Conductor's SDKs run against
//! shiftboss unchanged. A Conductor workflow is a shiftboss task; a Conductor task is one claim
//! of a shiftboss step (its `taskId` is `<step id>-<lease token>`, which fences every update).
//! Every verb is one the native API already uses: the worker routes go through the worker
//! protocol's claim and fenced replies (`routes/agents`), the workflow routes through the
//! engine's submission and the operator path. `docs/conductor-api.md` says what maps and where
//! the mapping loses something.

mod bulk;
mod execute;
mod metadata;
mod queues;
mod tasks;
mod token;
mod waits;
pub mod wire;
mod workflows;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(token::token))
        .routes(routes!(tasks::poll))
        .routes(routes!(tasks::batch_poll))
        .routes(routes!(tasks::update))
        .routes(routes!(tasks::logs, tasks::add_log))
        .routes(routes!(waits::update_by_ref))
        .routes(routes!(queues::sizes))
        .routes(routes!(queues::poll_data))
        .routes(routes!(metadata::register_workflows, metadata::update_workflows, metadata::list_workflows))
        .routes(routes!(metadata::get_workflow))
        .routes(routes!(metadata::register_task_defs, metadata::update_task_def, metadata::list_task_defs))
        .routes(routes!(metadata::get_task_def, metadata::delete_task_def))
        .routes(routes!(workflows::start))
        .routes(routes!(workflows::get, workflows::terminate, workflows::start_by_name))
        .routes(routes!(workflows::remove))
        .routes(routes!(workflows::pause))
        .routes(routes!(workflows::resume))
        .routes(routes!(workflows::retry))
        .routes(routes!(workflows::restart))
        .routes(routes!(workflows::rerun))
        .routes(routes!(workflows::skip))
        .routes(routes!(workflows::search))
        .routes(routes!(execute::execute))
        .routes(routes!(workflows::correlated))
        .routes(routes!(workflows::correlated_many))
        .routes(routes!(workflows::correlated_batch))
        .routes(routes!(bulk::pause))
        .routes(routes!(bulk::resume))
        .routes(routes!(bulk::retry))
        .routes(routes!(bulk::restart))
        .routes(routes!(bulk::terminate))
}
