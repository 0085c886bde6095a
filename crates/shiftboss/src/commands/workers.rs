//! `shiftboss workers ...`: the remote workers seen polling, and the release of what one held.

use crate::backend::Backend;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum WorkersCommand {
    /// List the remote workers seen polling, per agent type, with when each was last seen
    /// (recorded at most every few seconds per worker; forgotten after a day unseen).
    List {
        /// Print JSON (the API's answer) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Take back the steps a remote worker holds: each is pending again at once, its attempt
    /// counted as failed (in error when its retry policy has no try left), and a reply under the
    /// old lease is refused. For a worker that died and will not come back under its id soon, or
    /// one that starts again under it; never for a worker that still runs.
    Release {
        /// The worker's id, as it polls (`shiftboss workers list`).
        worker: String,
    },
}

impl WorkersCommand {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        match self {
            WorkersCommand::List { json } => {
                let list = b.list_workers().await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&list)?);
                    return Ok(());
                }
                println!("{:<20}  {:<40}  {:>10}  FIRST SEEN", "AGENT", "WORKER", "SEEN (S)");
                for a in &list.agents {
                    for w in &a.workers {
                        println!("{:<20}  {:<40}  {:>10.1}  {}", a.agent, w.worker, w.seconds_since, w.first_seen_at);
                    }
                }
            }
            WorkersCommand::Release { worker } => {
                let r = b.release_worker(&worker).await?;
                println!("worker {worker}: {} steps pending again, {} in error (no try left)", r.returned, r.gave_up);
            }
        }
        Ok(())
    }
}
