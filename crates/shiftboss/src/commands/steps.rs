//! `shiftboss steps ...`

use crate::target::DbTarget;
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
        /// Who, for the event log (default: your login name).
        #[arg(long)]
        actor: Option<String>,
    },
}

impl StepsCommand {
    pub async fn run(self, db: &DbTarget) -> anyhow::Result<()> {
        let store = db.open(false).await?;
        match self {
            StepsCommand::Resubmit { id, reason, actor } => {
                let actor = actor.unwrap_or_else(super::default_actor);
                store.resubmit_step(ResubmitStep { step_id: StepId(id), actor, reason }).await?;
                println!("step {id} resubmitted: pending; a running scheduler will pick it up");
            }
        }
        Ok(())
    }
}
