//! `shiftboss-lab chaos`: the fault-injection harness. Real worker processes (`shiftboss-lab
//! worker`: the product's `serve`, in this build that can die at the injected points; several on
//! one PostgreSQL, or one on a SQLite file) run N orders of the demo's workflow against the demo's
//! fake services, whose ledger records every effect by idempotency key. While they run, the
//! harness kills them with SIGKILL (at random moments, and at exact points through
//! `SHIFTBOSS_FAULT`), stops one with SIGSTOP for longer than complete-by, terminates their
//! PostgreSQL connections, restarts PostgreSQL, and restarts what it killed. At the end it reads
//! the store's event log and the services' ledger and checks (see `audit.rs`, `report.rs`).

mod audit;
mod drive;
mod faults;
mod notify;
mod process_submit;
mod replicas;
mod report;
mod run;
mod setup;
mod submit;
mod workers;

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

pub use run::run;

/// Restarts the machine's PostgreSQL cluster (Debian's tools; we run as root in CI).
const RESTART_POSTGRES: &str = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart";

#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// How many orders to run.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    tasks: u32,
    /// Worker processes (`shiftboss-lab worker`, each a scheduler and a supervisor). Default: 3 on
    /// PostgreSQL, 1 on SQLite.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    processes: Option<u32>,
    /// The longest time faults are injected; they stop earlier when every task is terminal.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// The mean time between two faults.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    fault_every: Duration,
    /// How long a paused (SIGSTOP) worker stays stopped: longer than the steps' 1 s complete-by
    /// and the 2 s leader lease.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pause_for: Duration,
    /// The seed of every random choice (faults, their moments, the services' faults are not
    /// seeded); printed, so that a run can be repeated.
    #[arg(long)]
    seed: Option<u64>,
    /// Also restart the PostgreSQL server now and then (it disturbs anything else using it).
    #[arg(long)]
    restart_postgres: bool,
    /// Run on a replicated PostgreSQL of the harness's own instead of `--db`: a primary and a
    /// synchronous standby on spare loopback ports (initdb and pg_basebackup of the installed
    /// server), the workers on a URL naming both. Now and then the primary is crashed (SIGKILL) or
    /// frozen (SIGSTOP) and the standby promoted; the old primary is made the new standby.
    #[arg(long, conflicts_with = "restart_postgres")]
    failover: bool,
    /// The command that restarts PostgreSQL (run with `sh -c`).
    #[arg(long, default_value = RESTART_POSTGRES)]
    postgres_restart_command: String,
    /// How long the whole run may take before it fails.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Steps each worker runs at once.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1000))]
    concurrency: u32,
    /// Where the services' ledger, the workers' logs and (by default) the SQLite store go.
    /// Default: a new directory under the system's temporary directory, removed after a pass.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Keep the work directory and the PostgreSQL schema after a pass (they are always kept
    /// after a failure).
    #[arg(long)]
    keep: bool,
    /// Skew the workers' wall clocks, alternately 10 minutes ahead and 10 minutes behind (with
    /// libfaketime, PostgreSQL only): every lease decision uses the database's clock, so no
    /// outcome may change.
    #[arg(long)]
    skew_clocks: bool,
    /// libfaketime's library, for --skew-clocks (Debian's package faketime).
    #[arg(long, default_value = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")]
    faketime_lib: PathBuf,
}
