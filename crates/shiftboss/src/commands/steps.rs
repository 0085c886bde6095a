//! `shiftboss steps ...`

use crate::backend::Backend;
use clap::Subcommand;
use shiftboss_core::StepId;
use shiftboss_store::ResubmitStep;

#[derive(Debug, Subcommand)]
pub enum StepsCommand {
    /// Send a step in error back to run again, with its failure count reset (after fixing the cause).
    Resubmit {
        /// The step's id (see `shiftboss tasks show`).
        id: i64,
        /// Why, for the event log.
        #[arg(long, default_value = "resubmitted by an operator")]
        reason: String,
        /// Who, for the event log (default: your login name). Not with --server, where the actor
        /// is the token's name.
        #[arg(long)]
        actor: Option<String>,
    },
}

impl StepsCommand {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        match self {
            StepsCommand::Resubmit { id, reason, actor } => {
                let actor = b.actor(actor)?;
                let done = b.resubmit_step(ResubmitStep { step_id: StepId(id), actor, reason }).await?;
                println!("step {} resubmitted: pending; a running scheduler will pick it up", done.id);
            }
        }
        Ok(())
    }
}
