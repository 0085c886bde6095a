//! A worker's log lines for a step (Conductor's task execution logs, issue 17): kept in the event
//! log as `step.log` events of the step's task, so that they are archived with it, streamed with
//! its other events and shown on its timeline. They are diagnostics, not state: writing them
//! changes no step and needs no lease (Conductor's own log route takes any task id).

use crate::StoreError;
use shiftboss_core::StepId;

/// The most lines one call writes.
pub const MAX_LOG_LINES: usize = 100;
/// The longest line, in bytes; a longer one is refused, not cut.
pub const MAX_LOG_LINE_BYTES: usize = 16 * 1024;
/// The most lines a read of one step's log returns (the oldest first).
pub const MAX_LOG_LINES_READ: u32 = 1_000;

/// Log lines for one step, from one writer.
#[derive(Debug, Clone)]
pub struct StepLogs {
    /// The step the lines are about; it must be live (an archived task's log is closed).
    pub step_id: StepId,
    /// Who wrote them: a worker's id, or a token's name.
    pub actor: String,
    /// The lines, in order.
    pub lines: Vec<String>,
}

impl StepLogs {
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.lines.is_empty() || self.lines.len() > MAX_LOG_LINES {
            return Err(StoreError::InvalidInput(format!("1 to {MAX_LOG_LINES} log lines at once")));
        }
        if let Some(l) = self.lines.iter().find(|l| l.len() > MAX_LOG_LINE_BYTES) {
            return Err(StoreError::InvalidInput(format!(
                "a log line of {} bytes; at most {MAX_LOG_LINE_BYTES}",
                l.len()
            )));
        }
        if self.actor.is_empty() || self.actor.len() > 200 {
            return Err(StoreError::InvalidInput("a log's writer is named in 1 to 200 bytes".into()));
        }
        Ok(())
    }
}
