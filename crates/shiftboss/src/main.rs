//! `shiftboss`: the command line of the shiftboss workflow engine.

mod commands;
mod demo;

use anyhow::Context;
use clap::{Parser, Subcommand};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::Store;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Parser)]
#[command(name = "shiftboss", version, about = "A durable workflow engine: every task seen through to the end.")]
struct Cli {
    /// The state store: a SQLite file.
    #[arg(long, global = true, env = "SHIFTBOSS_DB", default_value = "./shiftboss.db")]
    db: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the order-processing demo: fake stock, payment and shipping services that fail on
    /// purpose, N orders through them, and a summary.
    Demo(demo::DemoArgs),
    /// Look at and act on tasks.
    #[command(subcommand)]
    Tasks(commands::tasks::TasksCommand),
    /// Act on steps.
    #[command(subcommand)]
    Steps(commands::steps::StepsCommand),
}

/// Opens the state store; commands that only look or act on existing tasks do not create one.
pub fn open_store(path: &Path, create: bool) -> anyhow::Result<Arc<dyn Store>> {
    let opts = OpenOptions { create, ..OpenOptions::default() };
    let store =
        SqliteStore::open(path, &opts).with_context(|| format!("opening the state store {}", path.display()))?;
    Ok(Arc::new(store))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SHIFTBOSS_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Demo(args) => demo::run(&cli.db, args).await,
            Command::Tasks(c) => c.run(&cli.db).await.map(|()| true),
            Command::Steps(c) => c.run(&cli.db).await.map(|()| true),
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
