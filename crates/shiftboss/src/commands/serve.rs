//! `shiftboss serve`: run the scheduler, the supervisor and the HTTP API, all or some, until
//! stopped. Any number of serve processes may share one state store.

use crate::config::{FileConfig, Role};
use crate::target::DbTarget;
use anyhow::{Context, bail};
use clap::Args;
use shiftboss_engine::outbound::{Outbound, TlsConfig};
use shiftboss_engine::{BucketPolicy, Engine, EngineConfig, HttpAgent, PollMode, Roles};
use shiftboss_events::{EVENT_AGENT, EventAgent};
use shiftboss_scripts::jq::{JqLimits, WorkerCommand};
use shiftboss_scripts::{InlineAgent, JqAgent};
use shiftboss_server::bootstrap::{BOOTSTRAP_NAME, Bootstrap, ensure_admin_token};
use shiftboss_server::{ApiConfig, AuthMode, app, serve};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::signal::unix::{Signal, SignalKind, signal};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// This process's instance id: unique per process, stable across its restarts, so that a
    /// restarted scheduler takes back the steps it held. A second serve process on this host and
    /// store under the same id is refused. Default: the host name, or HOST-2, HOST-3... when
    /// another serve process on this host and store runs under it.
    #[arg(long, env = "SHIFTBOSS_INSTANCE_ID")]
    instance_id: Option<String>,
    /// The roles to run (comma-separated) [default: scheduler,supervisor,dispatcher,api].
    #[arg(long, env = "SHIFTBOSS_ROLES", value_delimiter = ',')]
    roles: Option<Vec<Role>>,
    /// Where the HTTP API listens, or "off" [default: 127.0.0.1:8080].
    #[arg(long, env = "SHIFTBOSS_LISTEN")]
    listen: Option<String>,
    /// Serve the API without tokens: every request acts as "anonymous" with every scope. For
    /// local play only: refused unless the API listens on a loopback address.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Where the first admin token's secret is written when the store has no token
    /// [default: ./shiftboss-admin.token].
    #[arg(long, env = "SHIFTBOSS_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<std::path::PathBuf>,
    /// The most steps run at once [default: 2048].
    #[arg(long)]
    concurrency: Option<u32>,
    /// Steps run at once to start with, and when there is no work; the number doubles while
    /// work waits and the agents keep their pace, up to --concurrency [default: 64; set it to
    /// --concurrency for a fixed number].
    #[arg(long)]
    min_concurrency: Option<u32>,
    /// Most steps claimed in one poll.
    #[arg(long)]
    max_per_poll: Option<u32>,
    /// How often to poll for due work when nothing wakes the scheduler and the store cannot
    /// notify (SQLite without a wake channel).
    #[arg(long, value_parser = humantime::parse_duration)]
    poll_interval: Option<Duration>,
    /// With a store that notifies (PostgreSQL): the longest an idle scheduler sleeps between polls
    /// (notifications and the next due time wake it sooner).
    #[arg(long, env = "SHIFTBOSS_IDLE_POLL", value_parser = humantime::parse_duration)]
    idle_poll: Option<Duration>,
    /// How long after start the first poll waits.
    #[arg(long, value_parser = humantime::parse_duration)]
    first_delay: Option<Duration>,
    /// fixed-delay: the next poll starts an interval after the last one ended; fixed-rate: polls
    /// start every interval.
    #[arg(long, value_parser = parse_poll_mode)]
    poll_mode: Option<PollMode>,
    /// The agent types this scheduler serves (comma-separated); default: every agent it has.
    #[arg(long, value_delimiter = ',')]
    serve_agents: Option<Vec<String>>,
    /// The load-balance buckets this scheduler claims from: all (default), share (its weighted
    /// share among the live schedulers, re-shared when one dies) or a list such as 0-127,200.
    #[arg(long)]
    buckets: Option<String>,
    /// This scheduler's weight when buckets are shared (its share of the machine power).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    weight: Option<u32>,
    /// An HTTP agent NAME wrapping the service at URL (repeatable), besides the config file's.
    #[arg(long = "agent", value_name = "NAME=URL", value_parser = parse_agent)]
    agents: Vec<(String, String)>,
    /// An agent type served by remote workers over the API's worker protocol, not in this
    /// process (comma-separated, repeatable): definitions may name it, workers may poll for it,
    /// and this process's scheduler never claims it. See docs/worker-protocol.md.
    #[arg(long = "remote-agent", env = "SHIFTBOSS_REMOTE_AGENTS", value_delimiter = ',')]
    remote_agents: Vec<String>,
    /// An address, CIDR range or host name that outbound calls may reach past the SSRF guard
    /// (comma-separated, repeatable), besides the config file's `[outbound] allow`; for example
    /// 127.0.0.1 for services on this host.
    #[arg(long = "allow-outbound", env = "SHIFTBOSS_OUTBOUND_ALLOW", value_delimiter = ',')]
    allow_outbound: Vec<String>,
    /// The supervisor's sweep never runs twice within this interval, and a lapsed lease is taken
    /// back within it.
    #[arg(long, value_parser = humantime::parse_duration)]
    supervisor_interval: Option<Duration>,
    /// With a store that notifies: the longest the idle supervisor sleeps between sweeps.
    #[arg(long, env = "SHIFTBOSS_SUPERVISOR_IDLE_INTERVAL", value_parser = humantime::parse_duration)]
    supervisor_idle_interval: Option<Duration>,
    /// Stop when standard input closes: for a parent process (the demo) that starts serve
    /// processes, so that they never outlive it, even when it is killed.
    #[arg(long, hide = true)]
    stop_when_stdin_closes: bool,
    /// An isolation domain this scheduler serves (repeatable), besides steps with no domain.
    #[arg(long = "domain")]
    domains: Vec<String>,
    /// The supervisor's leader lease time to live.
    #[arg(long, value_parser = humantime::parse_duration)]
    leader_ttl: Option<Duration>,
    /// How long a finished task (or job) stays in the hot tables before the archiver moves it to
    /// history.
    #[arg(long, env = "SHIFTBOSS_ARCHIVE_AFTER", value_parser = humantime::parse_duration)]
    archive_after: Option<Duration>,
    /// How long history is kept (default: for ever).
    #[arg(long, env = "SHIFTBOSS_ARCHIVE_KEEP", value_parser = humantime::parse_duration)]
    archive_keep: Option<Duration>,
}

fn parse_poll_mode(s: &str) -> Result<PollMode, String> {
    match s {
        "fixed-delay" => Ok(PollMode::FixedDelay),
        "fixed-rate" => Ok(PollMode::FixedRate),
        _ => Err(format!("{s:?}: use fixed-delay or fixed-rate")),
    }
}

fn parse_agent(s: &str) -> Result<(String, String), String> {
    let (name, url) = s.split_once('=').ok_or_else(|| format!("{s:?}: use NAME=URL"))?;
    shiftboss_core::workflow::check_name("agent", name).map_err(|e| e.to_string())?;
    Ok((name.to_owned(), url.to_owned()))
}

impl ServeArgs {
    /// No HTTP API unless `--listen` names an address: for processes that only work (the lab's
    /// chaos workers), many of which run on one host.
    pub fn without_api_by_default(mut self) -> Self {
        if self.listen.is_none() {
            self.listen = Some("off".into());
        }
        self
    }

    /// Flags (and their environment variables) over the file over the defaults.
    fn engine_config(&self, file: &FileConfig) -> anyhow::Result<EngineConfig> {
        let mut c = EngineConfig::default();
        c.submit.writers = file.server.submit_writers;
        let roles = self.roles.clone().or_else(|| file.roles.clone());
        if let Some(roles) = roles {
            c.roles = Roles {
                scheduler: roles.contains(&Role::Scheduler),
                supervisor: roles.contains(&Role::Supervisor),
                dispatcher: roles.contains(&Role::Dispatcher),
            };
        }
        let (s, fs) = (&mut c.scheduler, &file.scheduler);
        if let Some(v) = self.concurrency.or(fs.concurrency) {
            s.concurrency = v;
        }
        if let Some(v) = self.min_concurrency.or(fs.min_concurrency) {
            s.min_concurrency = v;
        }
        if let Some(v) = self.max_per_poll.or(fs.max_per_poll) {
            s.claim_batch = v;
        }
        if let Some(v) = self.poll_interval.or(fs.poll_interval) {
            s.poll_interval = v;
        }
        if let Some(v) = self.idle_poll.or(fs.idle_poll) {
            s.idle_poll = v;
        }
        if let Some(v) = self.first_delay.or(fs.first_delay) {
            s.first_delay = v;
        }
        if let Some(v) = self.poll_mode.or(fs.poll_mode) {
            s.poll_mode = v;
        }
        s.agents = self.serve_agents.clone().or_else(|| fs.agents.clone());
        let weight = self.weight.or(fs.weight).unwrap_or(1);
        s.buckets = match self.buckets.as_deref().or(fs.buckets.as_deref()) {
            None | Some("all") => BucketPolicy::All,
            Some("share") => BucketPolicy::Share { weight },
            Some(list) => BucketPolicy::List(
                shiftboss_core::buckets::parse_list(list).map_err(|e| anyhow::anyhow!("buckets: {e}"))?,
            ),
        };
        if let Some(t) = fs.heartbeat_ttl {
            s.heartbeat_ttl = t;
        }
        s.domains = if self.domains.is_empty() { fs.domains.clone().unwrap_or_default() } else { self.domains.clone() };
        for d in &s.domains {
            shiftboss_core::workflow::check_name("domain", d).map_err(anyhow::Error::msg)?;
        }
        s.limits = file
            .agents
            .iter()
            .filter(|(_, a)| a.max_concurrent.is_some() || a.per_second.is_some())
            .map(|(name, a)| shiftboss_store::AgentLimit {
                agent: name.clone(),
                max_concurrent: a.max_concurrent,
                per_second: a.per_second,
            })
            .collect();
        let (v, fv) = (&mut c.supervisor, &file.supervisor);
        if let Some(x) = self.supervisor_interval.or(fv.interval) {
            v.interval = x;
        }
        if let Some(x) = self.supervisor_idle_interval.or(fv.idle_interval) {
            v.idle_interval = x;
        }
        if let Some(x) = fv.batch {
            v.batch = x;
        }
        if let Some(x) = self.leader_ttl.or(fv.leader_ttl) {
            v.leader_ttl = x;
        }
        if let Some(x) = fv.reconcile_interval {
            v.reconcile_interval = x;
        }
        if let Some(x) = fv.stale_after {
            v.stale_after = x;
        }
        let (a, fa) = (&mut v.archive, &file.archive);
        if let Some(x) = fa.enabled {
            a.enabled = x;
        }
        if let Some(x) = fa.interval {
            a.interval = x;
        }
        if let Some(x) = self.archive_after.or(fa.after) {
            a.after = x;
        }
        if let Some(x) = self.archive_keep.or(fa.keep) {
            a.keep = Some(x);
        }
        if let Some(x) = fa.batch {
            a.batch = x;
        }
        let (w, fw) = (&mut c.webhooks, &file.webhooks);
        if let Some(x) = fw.concurrency {
            w.concurrency = x;
        }
        if let Some(x) = fw.call_timeout {
            w.call_timeout = x;
        }
        if let Some(x) = fw.lease {
            w.lease = x;
        }
        if let Some(x) = fw.idle_poll {
            w.idle_poll = x;
        }
        if let Some(x) = &fw.retry {
            w.retry = x.clone();
        }
        let (a, fa) = (&mut c.alerts, &file.alerts);
        if let Some(x) = fa.sinks()? {
            a.sinks = x;
        }
        if let Some(x) = fa.fold {
            a.fold = x;
        }
        if let Some(x) = fa.stuck_after {
            a.stuck_after = x;
        }
        if let Some(x) = fa.stuck_scan {
            a.stuck_scan = x;
        }
        if let Some(x) = fa.call_timeout {
            a.call_timeout = x;
        }
        if let Some(x) = fa.queue {
            a.queue = x;
        }
        if let Some(x) = fa.poll {
            a.poll = x;
        }
        if let Some(x) = fa.idle_poll {
            a.idle_poll = x;
        }
        Ok(c)
    }

    /// The API's address: none when it is off or its role is not run.
    fn listen(&self, file: &FileConfig, roles: &[Role]) -> anyhow::Result<Option<SocketAddr>> {
        if !roles.contains(&Role::Api) {
            return Ok(None);
        }
        let text = self.listen.clone().or_else(|| file.server.listen.clone()).unwrap_or_else(|| DEFAULT_LISTEN.into());
        if text == "off" {
            return Ok(None);
        }
        let addr: SocketAddr = text.parse().map_err(|_| {
            anyhow::anyhow!("--listen {text:?}: give an address and port such as 127.0.0.1:8080, or off")
        })?;
        if self.insecure_no_auth && !addr.ip().is_loopback() {
            bail!(
                "--insecure-no-auth serves the API to anyone: it is refused on {addr}, which is not a loopback address"
            );
        }
        Ok(Some(addr))
    }

    fn api_config(&self, file: &FileConfig) -> ApiConfig {
        let mut c = ApiConfig::default();
        if self.insecure_no_auth {
            c.auth = AuthMode::Disabled;
        }
        let f = &file.server;
        if let Some(v) = f.body_limit {
            c.limits.body_bytes = v;
        }
        if let Some(v) = f.request_timeout {
            c.limits.request_time = v;
        }
        if let Some(v) = f.max_in_flight {
            c.limits.in_flight = v.max(1);
        }
        c
    }

    pub async fn run(self, db: &DbTarget, file: &FileConfig) -> anyhow::Result<()> {
        if !file.server_enabled() {
            bail!("the server side is switched off here ([server] enabled = false, or SHIFTBOSS_SERVER_ENABLED=false)");
        }
        let config = self.engine_config(file)?;
        let roles_named = self.roles.clone().or_else(|| file.roles.clone()).unwrap_or_else(|| ALL_ROLES.to_vec());
        let listen = self.listen(file, &roles_named)?;
        if !config.roles.scheduler && !config.roles.supervisor && !config.roles.dispatcher && listen.is_none() {
            bail!(
                "nothing to run: --roles names no role (scheduler, supervisor, dispatcher, api), or only api with --listen off"
            );
        }
        let store = db.open(true).await?;
        report_replication(store.as_ref()).await;
        // Held until this function returns: no other serve process on this host takes the id
        // (and releases this one's claims) while this one lives.
        let hold = crate::instance::hold(db, self.instance_id.clone().or_else(|| file.instance_id.clone()))?;
        if let Some(note) = &hold.note {
            eprintln!("shiftboss serve: note: {note}");
        }
        let instance = hold.id.clone();
        let outbound_config = file.outbound(&self.allow_outbound)?;
        let outbound = Outbound::new(&outbound_config).context("[outbound]")?;
        // Webhooks go out through the same guard and allow-list as the HTTP agent's calls.
        let mut builder = Engine::builder(store, instance.clone())
            .agent("http", HttpAgent::new(outbound.clone()))
            .outbound(outbound.clone());
        // Conductor's INLINE, LAMBDA and JSON_JQ_TRANSFORM tasks (and JavaScript switches and loop
        // conditions) import as steps of these two; an agent of the same name below replaces them.
        let jq_worker = WorkerCommand::current_exe(&[shiftboss_scripts::jq::WORKER_SUBCOMMAND])
            .context("finding this executable for the jq workers")?;
        builder = builder
            .agent(shiftboss_scripts::agents::INLINE_AGENT, InlineAgent::default())
            .agent(shiftboss_scripts::agents::JQ_AGENT, JqAgent::new(jq_worker, JqLimits::default()));
        // Conductor's EVENT tasks: messages to NATS, JetStream or a webhook. It connects to NATS on
        // first use, so a NATS that is down fails those steps (transiently), not this process.
        let events = EventAgent::new(&file.events(), outbound.clone()).context("[events]")?;
        builder = builder.agent(EVENT_AGENT, events);
        if let Some(p) = &file.retry {
            builder = builder.default_retry(p.clone());
        }
        for (name, a) in &file.agents {
            // An agent with TLS settings of its own gets a client of its own.
            let agent_outbound = if a.ca_bundle.is_some() || a.client_cert.is_some() || a.client_key.is_some() {
                let mut c = outbound_config.clone();
                c.tls = TlsConfig {
                    ca_bundle: a.ca_bundle.clone(),
                    client_cert: a.client_cert.clone(),
                    client_key: a.client_key.clone(),
                };
                Outbound::new(&c).with_context(|| format!("agent {name} in the config file"))?
            } else {
                outbound.clone()
            };
            let agent = HttpAgent::for_service(&a.base_url, agent_outbound)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("agent {name} in the config file"))?;
            builder = builder.agent(name.clone(), agent);
            if let Some(p) = &a.retry {
                builder = builder.agent_retry(name.clone(), p.clone());
            }
        }
        for (name, url) in &self.agents {
            let agent = HttpAgent::for_service(url, outbound.clone())
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("--agent {name}"))?;
            builder = builder.agent(name.clone(), agent);
        }
        for name in &self.remote_agents {
            builder = builder.remote_agent(name.clone());
        }
        let roles = config.roles;
        let engine = builder.config(config).client(file.client()?).build()?;
        // The API binds before the roles start: a busy port stops the process before it claims anything.
        let api = match listen {
            Some(addr) => Some(self.start_api(&engine, file, addr).await?),
            None => None,
        };
        // Made whole before it is written: stderr is unbuffered, and a line written in pieces
        // can be read half-written by whatever watches for it.
        let announce = format!(
            "shiftboss serve: instance {instance} on {db}, roles:{}{}{}{}",
            if roles.scheduler { " scheduler" } else { "" },
            if roles.supervisor { " supervisor" } else { "" },
            if roles.dispatcher { " dispatcher" } else { "" },
            api.as_ref().map(|a| format!(" api (http://{})", a.addr)).unwrap_or_default(),
        );
        eprintln!("{announce}");
        // Listening from before the roles start, so that no signal falls between two listeners.
        let mut signals = Signals::new().context("listening for SIGTERM and SIGINT")?;
        let running = (roles.scheduler || roles.supervisor || roles.dispatcher).then(|| engine.start());
        if self.stop_when_stdin_closes {
            tokio::select! {
                _ = signals.next() => {}
                _ = stdin_closed() => {}
            }
        } else {
            signals.next().await;
        }
        eprintln!(
            "shiftboss serve: stopping (the API finishes its requests, running steps get their grace period; a second SIGTERM or Ctrl-C stops at once)"
        );
        let stop = async {
            // The API stops taking requests and finishes those in flight while the roles stop.
            let api_done = async {
                if let Some(api) = api {
                    api.stop().await;
                }
            };
            let roles_done = async {
                if let Some(r) = running {
                    r.shutdown().await;
                }
            };
            tokio::join!(api_done, roles_done);
        };
        tokio::select! {
            _ = stop => Ok(()),
            signal = signals.next() => {
                // An operator who asks twice wants out now, whatever is left: steps still running
                // and replies not yet written are left to lapse, as after a crash.
                eprintln!(
                    "shiftboss serve: second {}: exiting at once; steps still held come back when their leases lapse",
                    signal.name()
                );
                std::process::exit(signal.exit_code())
            }
        }
    }

    /// Binds the API's address, makes the first admin token if the store has none, and serves.
    async fn start_api(&self, engine: &Engine, file: &FileConfig, addr: SocketAddr) -> anyhow::Result<RunningApi> {
        let config = self.api_config(file);
        if config.auth == AuthMode::Disabled {
            eprintln!(
                "shiftboss serve: WARNING: --insecure-no-auth: the API on {addr} answers anyone on this host, with every scope"
            );
        } else {
            let path = self
                .admin_token_file
                .clone()
                .or_else(|| file.server.admin_token_file.clone())
                .unwrap_or_else(|| DEFAULT_ADMIN_TOKEN_FILE.into());
            match ensure_admin_token(engine.store().as_ref(), &path).await? {
                Bootstrap::Created(p) => eprintln!(
                    "shiftboss serve: the store had no API token: made the admin token {BOOTSTRAP_NAME:?}; its secret is in {} (readable by this user only)",
                    p.display()
                ),
                Bootstrap::TokensExist | Bootstrap::MadeElsewhere => {}
            }
        }
        let (router, _) = app(engine.clone(), config).context("building the API")?;
        let listener =
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr} (--listen)"))?;
        let addr = listener.local_addr().unwrap_or(addr);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = rx.await;
            };
            if let Err(e) = serve(listener, router, stopped).await {
                tracing::error!(error = %e, "the API stopped");
            }
        });
        Ok(RunningApi { addr, stop: tx, task })
    }
}

/// The API's address when neither flag, environment nor file names one.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Where the first admin token's secret goes by default.
const DEFAULT_ADMIN_TOKEN_FILE: &str = "shiftboss-admin.token";
/// What serve runs when no role is named.
const ALL_ROLES: [Role; 4] = [Role::Scheduler, Role::Supervisor, Role::Dispatcher, Role::Api];
/// How long the API may take to finish the requests in flight once told to stop.
const API_GRACE: Duration = Duration::from_secs(10);

/// The API while it serves.
struct RunningApi {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningApi {
    /// Stops accepting, and waits for the requests in flight, at most [`API_GRACE`].
    async fn stop(self) {
        let _ = self.stop.send(());
        if tokio::time::timeout(API_GRACE, self.task).await.is_err() {
            eprintln!("shiftboss serve: API requests still running after {API_GRACE:?} were dropped");
        }
    }
}

/// Resolves when standard input reaches its end (the parent closed it or died).
async fn stdin_closed() {
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    })
    .await;
}

/// SIGTERM and SIGINT, listened to once for the whole run: the first asks for a graceful stop,
/// the second for an immediate one.
struct Signals {
    term: Signal,
    int: Signal,
}

#[derive(Debug, Clone, Copy)]
enum Received {
    Term,
    Int,
}

impl Received {
    fn name(self) -> &'static str {
        match self {
            Received::Term => "SIGTERM",
            Received::Int => "SIGINT",
        }
    }

    /// 128 + the signal's number, as a shell reports a process ended by it.
    fn exit_code(self) -> i32 {
        match self {
            Received::Term => 128 + 15,
            Received::Int => 128 + 2,
        }
    }
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        Ok(Signals { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    async fn next(&mut self) -> Received {
        tokio::select! {
            _ = self.term.recv() => Received::Term,
            _ = self.int.recv() => Received::Int,
        }
    }
}

/// Says at start whether a commit waits for a standby (issue 26): a warning when standbys
/// replicate asynchronously, since a failover to one may lose acknowledged work. `/readyz` says
/// the same later. A store that does not answer here is the roles' to wait for.
async fn report_replication(store: &dyn shiftboss_store::Store) {
    match store.replication().await {
        Ok(Some(r)) => match r.warning() {
            Some(w) => tracing::warn!("state store replication: {w}"),
            None if r.standbys == 0 => tracing::info!("state store replication: no standby streams from this server"),
            None => tracing::info!(
                standbys = r.standbys,
                synchronous = r.synchronous_standbys,
                "state store replication: commits wait for a synchronous standby"
            ),
        },
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not read the state store's replication settings"),
    }
}
