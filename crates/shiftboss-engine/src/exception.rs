//! Exception strategies (M5): what a handler's error or panic counts as. A handler returns a
//! success, a failure with a reason (`AgentError::Failure`), or it errs or panics; a strategy,
//! set per agent, turns the last two into a result. Without one, the runtime's own rules apply
//! (transient: tried again within complete-by; permanent: Error at once; panic: a failure).

use crate::agent::AgentError;

/// What went wrong, as a strategy sees it.
#[derive(Debug, Clone, Copy)]
pub enum Exception<'a> {
    /// The agent returned a transient or permanent error.
    Error(&'a AgentError),
    /// The agent panicked with this message.
    Panic(&'a str),
}

/// What an exception counts as.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The step succeeded with this output.
    Succeeded(serde_json::Value),
    /// The attempt failed: the step's retry policy sets the next try, or gives up.
    Failed(String),
    /// The step gives up at once (Error, for a person to handle).
    GaveUp(String),
    /// The runtime's own rule for this exception.
    AsIs,
}

/// Maps exceptions to results for one agent type.
pub trait ExceptionStrategy: Send + Sync + 'static {
    fn judge(&self, e: Exception<'_>) -> Verdict;
}

impl<F> ExceptionStrategy for F
where
    F: Fn(Exception<'_>) -> Verdict + Send + Sync + 'static,
{
    fn judge(&self, e: Exception<'_>) -> Verdict {
        self(e)
    }
}

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "the handler panicked".to_owned(),
    }
}
