//! `shiftboss-lab`: the lab, apart from the product. The chaos harness and the benchmark drivers,
//! and the worker processes the harness starts and kills. Built with crash injection
//! (`shiftboss-store`'s feature `fault-injection`, on by default here), which the product binary
//! `shiftboss` never carries. It reuses the product's library (the demo's workflow and fake
//! services, the store target, `serve`); nothing depends on it.

mod bench;
mod chaos;

use clap::{Parser, Subcommand};
use shiftboss::commands::serve::ServeArgs;
use shiftboss::commands::tasks::TasksCommand;
use shiftboss::config::FileConfig;
use shiftboss::target::{self, DbTarget};
use std::process::ExitCode;

// The allocator of the product's binary (see its main.rs), so that the lab's in-process drains
// measure what `serve` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "shiftboss-lab",
    version,
    about = "The shiftboss lab: the fault-injection harness and the benchmark drivers (not for production)."
)]
struct Cli {
    /// The state store: a SQLite file (PATH or sqlite:PATH), or postgres://... [default: bench
    /// and worker ./shiftboss.db; chaos a new file in its work directory]
    #[arg(long, global = true, env = "SHIFTBOSS_DB")]
    db: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The fault-injection harness: real worker processes killed, paused and cut off from their
    /// database while they run N orders; checks that nothing is lost, applied twice or applied late.
    Chaos(chaos::ChaosArgs),
    /// Benchmark workloads, one JSON line each (the harness is `bench/run`).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The product's `shiftboss serve`, in this build: a chaos worker that can die at the point
    /// `SHIFTBOSS_FAULT=POINT@N` names. Takes serve's flags (no API unless `--listen` is given), and
    /// the config file SHIFTBOSS_CONFIG names.
    Worker(Box<ServeArgs>),
    /// Internal: the product's `shiftboss tasks`, for the harness's submitting processes.
    #[command(subcommand, hide = true)]
    Tasks(TasksCommand),
}

async fn run(cli: Cli) -> anyhow::Result<bool> {
    let db = || DbTarget::parse(cli.db.as_deref().unwrap_or(target::DEFAULT_DB));
    match cli.command {
        Command::Chaos(args) => chaos::run(cli.db.as_deref(), args).await,
        Command::Bench(c) => c.run(&db()?).await.map(|()| true),
        Command::Worker(args) => {
            // The config file SHIFTBOSS_CONFIG names, and the environment, as the product reads
            // them: the harness gives its workers a file of its own.
            let mut file = match std::env::var_os("SHIFTBOSS_CONFIG") {
                Some(path) => FileConfig::load(std::path::Path::new(&path))?,
                None => FileConfig::default(),
            };
            file.apply_env()?;
            args.without_api_by_default().run(&db()?, &file).await.map(|()| true)
        }
        Command::Tasks(c) => {
            // The product's direct path, as `shiftboss --db` runs it (no --config: no [client]).
            let direct = shiftboss::backend::StoreBackend::new(db()?, FileConfig::default().client());
            c.run(&direct).await.map(|()| true)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SHIFTBOSS_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    // As the product's binary does: its serve and benchmark engines run up to 2,048 calls at once.
    shiftboss::open_files::raise_to_hard_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The exit codes are the product's: the harness tells a worker that could not start (2) from
    // one that crashed.
    match runtime.block_on(run(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
