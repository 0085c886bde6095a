//! Operator commands.

pub mod bulk;
pub mod event_text;
pub mod jobs;
pub mod json_arg;
pub mod migrate;
pub mod serve;
pub mod steps;
pub mod tasks;
pub mod tokens;
pub mod webhooks;
pub mod workers;
pub mod workflows;

/// Who an operator action is recorded as: `--actor`, else the login name.
pub fn default_actor() -> String {
    std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "operator".into())
}
