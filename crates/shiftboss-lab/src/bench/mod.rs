//! `shiftboss-lab bench WORKLOAD`: the engine-side drivers of the benchmark harness (`bench/run`).
//!
//! Each workload runs against the store `--db` names, through the engine's and the store's real
//! paths, and prints one JSON line on stdout for the orchestrator; progress goes to stderr.
//! Peers, raw database limits, idle load and memory are measured by the orchestrator itself.

mod api;
mod claim;
mod enqueue;
mod error;
mod flow;
mod jobs;
mod noop;
mod notify;
mod pickup;
mod recovery;
mod remote;
mod sqlite_commits;
mod stats;
mod submit;

use clap::Subcommand;
pub use error::BenchError;
use shiftboss::target::DbTarget;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Throughput: N one-step no-op jobs enqueued in bulk, then drained; jobs/s of the drain.
    Jobs(jobs::JobsArgs),
    /// Pickup latency on an idle system: one job every interval; submit's commit to handler start.
    Pickup(pickup::PickupArgs),
    /// The demo's 3-step order workflow with in-process no-op agents (no HTTP, no faults).
    Flow(flow::FlowArgs),
    /// Single submissions from concurrent clients, each its own transaction; with `--drain`, end
    /// to end from the first submission to the last completion.
    Submit(submit::SubmitArgs),
    /// Submissions through a running serve's HTTP API from concurrent clients (bench/api starts it).
    Api(api::ApiArgs),
    /// Remote workers: worker processes (the Rust client) draining one-step no-op steps through a
    /// running serve's API, and the pickup of a waiting long poll (bench/remote starts the serve).
    Remote(remote::RemoteArgs),
    /// Internal: one worker process of `bench remote`.
    #[command(hide = true)]
    RemoteWorker(remote::RemoteWorkerArgs),
    /// Status channels: commit-to-receiver latency idle and under a drain, deliveries per second,
    /// and the drain with one subscription per task against the drain without.
    Notify(notify::NotifyArgs),
    /// Recovery: a step whose agent's process dies; time from its complete-by to its next start.
    Recovery(recovery::RecoveryArgs),
    /// Claim and sweep cost against whatever finished records the store already holds.
    Claim(claim::ClaimArgs),
    /// The raw limit of SQLite: one-row UPDATE commits per second in WAL mode (rusqlite).
    SqliteCommits(sqlite_commits::SqliteCommitsArgs),
    /// Internal: the process of a recovery round that claims a step and dies in its agent.
    #[command(hide = true)]
    RecoveryVictim(recovery::VictimArgs),
}

impl BenchCommand {
    pub async fn run(self, db: &DbTarget) -> anyhow::Result<()> {
        let out = match self {
            BenchCommand::Jobs(a) => jobs::run(db, a).await?,
            BenchCommand::Pickup(a) => pickup::run(db, a).await?,
            BenchCommand::Flow(a) => flow::run(db, a).await?,
            BenchCommand::Submit(a) => submit::run(db, a).await?,
            BenchCommand::Api(a) => api::run(a).await?,
            BenchCommand::Remote(a) => remote::run(a).await?,
            BenchCommand::RemoteWorker(a) => return remote::worker(a).await,
            BenchCommand::Notify(a) => notify::run(db, a).await?,
            BenchCommand::Recovery(a) => recovery::run(db, a).await?,
            BenchCommand::Claim(a) => claim::run(db, a).await?,
            BenchCommand::SqliteCommits(a) => sqlite_commits::run(db, a).await?,
            BenchCommand::RecoveryVictim(a) => return recovery::victim(db, a).await,
        };
        println!("{out}");
        Ok(())
    }
}

/// Which store a result was measured on, for the orchestrator's table.
fn store_name(db: &DbTarget) -> &'static str {
    match db {
        DbTarget::Sqlite(_) => "sqlite",
        DbTarget::Postgres(_) => "postgres",
    }
}
