//! `shiftboss`: the command line of the shiftboss workflow engine.
//!
//! The modules live in the library (`lib.rs`), which the lab reuses; the chaos harness and the
//! benchmark drivers are the lab's binary, `shiftboss-lab`, not this one.

use anyhow::bail;
use clap::{Parser, Subcommand};
use shiftboss::backend::{ApiBackend, ServerTarget, StoreBackend};
use shiftboss::config::{FileConfig, StoreSection};
use shiftboss::target::{self, DbTarget};
use shiftboss::{commands, demo};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

// mimalloc, not glibc's malloc: serve's HTTP clients and servers allocate and free many small,
// short-lived buffers across the runtime's threads, and glibc's malloc and free were about a
// fifth of serve's CPU in a profile of the HTTP agent's drain. Built without transparent huge
// pages (`no_thp`), whose zeroing took more than malloc had. Figures: docs/performance.md, "The
// allocator".
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "shiftboss", version, about = "A durable workflow engine: every task seen through to the end.")]
struct Cli {
    /// The state store: a SQLite file (PATH or sqlite:PATH), or postgres://... [default: ./shiftboss.db]
    #[arg(long, global = true, env = "SHIFTBOSS_DB")]
    db: Option<String>,
    /// A running server's HTTP API (http://HOST:PORT, or https://): the operator commands
    /// (workflows, tasks, steps, jobs) go through it instead of opening the store, and print the
    /// same. Not with --db. Actions are recorded as the token's name, so --actor is refused.
    /// `tokens`, `migrate`, `serve` and `demo` work on the store only.
    #[arg(long, global = true, env = "SHIFTBOSS_SERVER", value_name = "URL")]
    server: Option<String>,
    /// The API token for --server (made by `shiftboss tokens create`). Prefer the variable: a
    /// command line is visible to the machine's other users.
    #[arg(long, global = true, env = "SHIFTBOSS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The longest one request to --server may take, connecting included (at most 5 s of it).
    #[arg(long, global = true, env = "SHIFTBOSS_SERVER_TIMEOUT", default_value = "60s", value_name = "DURATION", value_parser = humantime::parse_duration)]
    server_timeout: Duration,
    /// A PEM file of CA certificates to trust, besides the system's, for an https:// --server.
    #[arg(long, global = true, env = "SHIFTBOSS_SERVER_CA", value_name = "FILE")]
    server_ca: Option<PathBuf>,
    /// The longest one store transaction may take (config store.timeout; default 10s).
    #[arg(long, global = true, env = "SHIFTBOSS_STORE_TIMEOUT", value_name = "DURATION", value_parser = humantime::parse_duration)]
    store_timeout: Option<Duration>,
    /// How long one host of a postgres:// URL may take to connect (default 5s).
    #[arg(long, global = true, env = "SHIFTBOSS_STORE_CONNECT_TIMEOUT", value_name = "DURATION", value_parser = humantime::parse_duration)]
    store_connect: Option<Duration>,
    /// How long a command waits for a store out of reach, retrying (default 30s; 0s: none).
    #[arg(long, global = true, env = "SHIFTBOSS_STORE_WAIT", value_name = "DURATION", value_parser = humantime::parse_duration)]
    store_wait: Option<Duration>,
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
    Serve(Box<commands::serve::ServeArgs>),
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
    /// Remote workers: which were seen polling (list), and taking back what one held (release).
    #[command(subcommand)]
    Workers(commands::workers::WorkersCommand),
    /// Retry jobs: enqueue, list, show, search history, resubmit.
    #[command(subcommand)]
    Jobs(commands::jobs::JobsCommand),
    /// Status channels: standing webhook subscriptions (create, list).
    #[command(subcommand)]
    Subscriptions(commands::webhooks::SubscriptionsCommand),
    /// Status channels: the outbox's deliveries (list; redeliver dead ones).
    #[command(subcommand)]
    Deliveries(commands::webhooks::DeliveriesCommand),
    /// API tokens for the HTTP API: create (the secret is shown once), list, revoke. On the store
    /// only (--db), never through --server: a token is what reaches the API in the first place.
    #[command(subcommand)]
    Tokens(commands::tokens::TokensCommand),
}

async fn run(cli: Cli) -> anyhow::Result<bool> {
    let mut file = match &cli.config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    file.apply_env()?;
    let flags = StoreSection { timeout: cli.store_timeout, connect_timeout: cli.store_connect, wait: cli.store_wait };
    target::set_bounds(file.store_bounds(&flags)?);
    if let Some(url) = cli.server.clone() {
        return run_remote(cli, &url).await;
    }
    let db = cli.db.clone().or_else(|| file.db.clone()).unwrap_or_else(|| target::DEFAULT_DB.to_owned());
    let db = DbTarget::parse(&db)?;
    let direct = || StoreBackend::new(db.clone(), file.client());
    match cli.command {
        Command::Demo(args) => demo::run(&db, args).await,
        Command::Serve(args) => args.run(&db, &file).await.map(|()| true),
        Command::Migrate => commands::migrate::run(&db).await.map(|()| true),
        Command::Workflows(c) => c.run(&direct()).await.map(|()| true),
        Command::Tasks(c) => c.run(&direct()).await.map(|()| true),
        Command::Steps(c) => c.run(&direct()).await.map(|()| true),
        Command::Workers(c) => c.run(&direct()).await.map(|()| true),
        Command::Jobs(c) => c.run(&direct()).await.map(|()| true),
        Command::Subscriptions(c) => c.run(&direct()).await.map(|()| true),
        Command::Deliveries(c) => c.run(&direct()).await.map(|()| true),
        Command::Tokens(c) => c.run(&db).await.map(|()| true),
    }
}

/// An operator command through a server's API (`--server`).
async fn run_remote(cli: Cli, url: &str) -> anyhow::Result<bool> {
    if cli.db.is_some() {
        bail!(
            "--server and --db (or SHIFTBOSS_SERVER and SHIFTBOSS_DB) are both set: choose one \
             (--server goes through a server's API, --db opens the store itself)"
        );
    }
    let Some(token) = cli.token.filter(|t| !t.trim().is_empty()) else {
        bail!("--server needs a token: --token or SHIFTBOSS_TOKEN (`shiftboss tokens create` makes one)");
    };
    let target = ServerTarget { url: url.to_owned(), token, timeout: cli.server_timeout, ca_bundle: cli.server_ca };
    let api = || ApiBackend::new(&target);
    match cli.command {
        Command::Workflows(c) => c.run(&api()?).await.map(|()| true),
        Command::Tasks(c) => c.run(&api()?).await.map(|()| true),
        Command::Steps(c) => c.run(&api()?).await.map(|()| true),
        Command::Workers(c) => c.run(&api()?).await.map(|()| true),
        Command::Jobs(c) => c.run(&api()?).await.map(|()| true),
        Command::Subscriptions(c) => c.run(&api()?).await.map(|()| true),
        Command::Deliveries(c) => c.run(&api()?).await.map(|()| true),
        // Tokens are how the API is reached at all: they are made on the store, by its admin.
        Command::Tokens(_) => bail!("`shiftboss tokens` works on the store only: use --db, not --server"),
        Command::Demo(_) => bail!("`shiftboss demo` works on the store only: use --db, not --server"),
        Command::Serve(_) => bail!("`shiftboss serve` works on the store only: use --db, not --server"),
        Command::Migrate => bail!("`shiftboss migrate` works on the store only: use --db, not --server"),
    }
}

fn main() -> ExitCode {
    // `serve` runs jq filters in children of this same binary (shiftboss-scripts' worker), so
    // that a filter that loops or grows without end costs a child, not the server.
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some(shiftboss_scripts::jq::WORKER_SUBCOMMAND) {
        let rest: Vec<String> = args.collect();
        return ExitCode::from(shiftboss_scripts::jq::worker::worker_main(&rest).clamp(0, 255) as u8);
    }
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SHIFTBOSS_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    shiftboss::open_files::raise_to_hard_limit();
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
