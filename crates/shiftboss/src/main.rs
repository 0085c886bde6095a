//! `shiftboss`: the command line of the shiftboss workflow engine.
//!
//! The modules live in the library (`lib.rs`), which the lab reuses; the chaos harness and the
//! benchmark drivers are the lab's binary, `shiftboss-lab`, not this one.

use clap::{Parser, Subcommand};
use shiftboss::config::FileConfig;
use shiftboss::target::{self, DbTarget};
use shiftboss::{commands, demo};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "shiftboss", version, about = "A durable workflow engine: every task seen through to the end.")]
struct Cli {
    /// The state store: a SQLite file (PATH or sqlite:PATH), or postgres://... [default: ./shiftboss.db]
    #[arg(long, global = true, env = "SHIFTBOSS_DB")]
    db: Option<String>,
    /// A TOML config file; flags and environment variables override what it says.
    #[arg(long, global = true, env = "SHIFTBOSS_CONFIG")]
    config: Option<PathBuf>,
    /// How log lines are written to standard error: text, or json (one object per line, with
    /// the request id of the API request a line belongs to). Levels: SHIFTBOSS_LOG.
    #[arg(long, global = true, env = "SHIFTBOSS_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the order-processing demo: fake stock, payment and shipping services that fail on
    /// purpose, N orders through them, and a summary.
    Demo(demo::DemoArgs),
    /// Run the scheduler and supervisor roles (all or some) until stopped with Ctrl-C or SIGTERM.
    Serve(commands::serve::ServeArgs),
    /// Create the state store, or bring its schema to this build's version.
    Migrate,
    /// Register workflow definitions (JSON, YAML or Conductor's) and look at them.
    #[command(subcommand)]
    Workflows(commands::workflows::WorkflowsCommand),
    /// Start, look at and act on tasks.
    #[command(subcommand)]
    Tasks(commands::tasks::TasksCommand),
    /// Act on steps.
    #[command(subcommand)]
    Steps(commands::steps::StepsCommand),
    /// Retry jobs: enqueue, list, show, search history, resubmit.
    #[command(subcommand)]
    Jobs(commands::jobs::JobsCommand),
    /// API tokens for the HTTP API: create (the secret is shown once), list, revoke.
    #[command(subcommand)]
    Tokens(commands::tokens::TokensCommand),
}

async fn run(cli: Cli) -> anyhow::Result<bool> {
    let mut file = match &cli.config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    file.apply_env()?;
    let db = cli.db.clone().or_else(|| file.db.clone()).unwrap_or_else(|| target::DEFAULT_DB.to_owned());
    let db = DbTarget::parse(&db)?;
    match cli.command {
        Command::Demo(args) => demo::run(&db, args).await,
        Command::Serve(args) => args.run(&db, &file).await.map(|()| true),
        Command::Migrate => commands::migrate::run(&db).await.map(|()| true),
        Command::Workflows(c) => c.run(&db).await.map(|()| true),
        Command::Tasks(c) => c.run(&db).await.map(|()| true),
        Command::Steps(c) => c.run(&db).await.map(|()| true),
        Command::Jobs(c) => c.run(&db, &file).await.map(|()| true),
        Command::Tokens(c) => c.run(&db).await.map(|()| true),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SHIFTBOSS_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli));
    // Dropping the runtime would wait for ever for blocking threads (a SQLite call held by another
    // process's lock, a read of standard input): a command that is done does not wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
