//! Conductor's scripted tasks as in-process agents: `inline` evaluates JavaScript (INLINE,
//! LAMBDA, and the JavaScript of SWITCH and DO_WHILE once imported) and `jq` runs jq filters
//! (JSON_JQ_TRANSFORM). The core stays free of script engines: the Conductor importer turns those
//! tasks into agent steps of these agents, and the engines that may run imported workflows
//! (`serve`, the demo) register them.
//!
//! - [`js`]: QuickJS in the process, one fresh runtime per evaluation, on a blocking thread,
//!   with a deadline (interrupt handler), a memory limit, a stack limit and no I/O at all.
//! - [`jq`]: jaq in worker processes (jaq cannot be interrupted, and a filter can allocate
//!   without end): a small pool of long-lived children, each under an address-space limit,
//!   killed and replaced when a filter runs past its time.
//! - [`agents`]: the two agents, their configs, outputs (`{result}` and `{result, resultList}` as
//!   in Conductor) and errors (permanent, with the script's own message).

pub mod agents;
pub mod jq;
pub mod js;

pub use agents::{InlineAgent, JqAgent};

/// Why a script or filter gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The script threw, or did not parse (its own message).
    #[error("the script failed: {0}")]
    Threw(String),
    #[error("the script ran past its time limit of {0:?} and was stopped")]
    TimedOut(std::time::Duration),
    #[error("the script ran out of memory (its limit is {0} bytes) and was stopped")]
    OutOfMemory(usize),
    #[error("the script's input could not be given to it: {0}")]
    Input(String),
    #[error("the script's result cannot be used: {0}")]
    Result(String),
    /// The engine itself failed (not the script's fault).
    #[error("the script engine failed: {0}")]
    Engine(String),
    /// The jq filter failed (its own message).
    #[error("jq: {0}")]
    Jq(String),
}
