//! The API's routes, one module per resource.

pub mod actions;
pub mod agents;
pub mod bulk;
pub mod conductor;
pub mod health;
pub mod jobs;
pub mod stream;
pub mod tasks;
pub mod webhooks;
pub mod workflows;
