//! shiftboss's HTTP API: tasks, operator actions, workflows and retry jobs over the network, for
//! applications in any language and for operators without database credentials.
//!
//! Layout:
//! - [`server`]: the router, its middleware and the run with a graceful end.
//! - [`routes`]: one module per resource (tasks, operator actions, workflows, jobs, health).
//! - [`auth`]: bearer tokens and scopes, deny by default; [`bootstrap`]: the first admin token.
//! - [`wire`]: the JSON the API speaks; [`error`]: problem answers (RFC 9457).
//! - [`observe`]: request ids, logs and metrics around every request; [`metrics`]: `/metrics`.
//! - [`openapi`]: the OpenAPI 3.1 document made from the handlers.
//! - [`console`]: the operator's console, server-rendered pages behind the same tokens.
//!
//! Architecture invariant: no SQL here; every state change goes through the engine or the store
//! contract, as the CLI's do.

pub mod auth;
pub mod bootstrap;
pub mod console;
pub mod error;
pub mod json;
pub mod limits;
pub mod metrics;
pub mod observe;
pub mod openapi;
pub mod query;
pub mod routes;
pub mod server;
pub mod state;
pub mod wire;

pub use auth::AuthMode;
pub use limits::Limits;
pub use server::{ApiConfig, app, serve};
