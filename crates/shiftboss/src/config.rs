//! The TOML config file (`--config FILE` or `SHIFTBOSS_CONFIG`). Flags override the environment,
//! which overrides the file, which overrides the built-in defaults.
//!
//! ```toml
//! db = "postgres://postgres@127.0.0.1:5432/test"   # or "sqlite:./shiftboss.db"
//! instance_id = "node-1"                            # unique per process, stable across its restarts
//! roles = ["scheduler", "supervisor", "api"]   # default: all three
//! retry = { kind = "intervals", intervals = ["1m", "5m", "10m", "30m", "1h"] }  # the default policy
//!
//! [store]                          # how long anything waits on the state store
//! timeout = "10s"                  # the longest one transaction may take (PostgreSQL: statement_timeout too)
//! connect_timeout = "5s"           # per host of a multi-host URL: a silent one is skipped after this
//! wait = "30s"                     # how long a command (not serve) rides out a store out of reach
//!
//! [scheduler]
//! concurrency = 2048               # the most steps run at once
//! min_concurrency = 64             # where that starts: it grows while work waits and the agents keep their pace
//! max_per_poll = 1000
//! poll_interval = "500ms"          # the poll period when the store cannot notify (SQLite)
//! idle_poll = "10s"                # the poll period when it can (PostgreSQL's LISTEN/NOTIFY)
//! first_delay = "0s"
//! poll_mode = "fixed-delay"        # or "fixed-rate"
//! agents = ["stock", "payment"]    # the agent types served; default: all
//! buckets = "share"                # "all" (default), "share" (by weight among live schedulers) or "0-127,200"
//! weight = 2                       # this scheduler's share of the machine power, with "share"
//! heartbeat_ttl = "6s"
//! domains = ["gpu"]                # isolation domains served, besides steps with no domain
//!
//! [supervisor]
//! interval = "1s"                  # a lapsed lease is taken back within it; never two sweeps within it
//! idle_interval = "10s"            # with a store that notifies: the longest sleep between sweeps
//! batch = 1000
//! leader_ttl = "15s"               # renewed every third of it
//! reconcile_interval = "1s"        # timed waits and task timeouts are enforced within it
//! stale_after = "1m"               # a live task with nothing live is decided again after this
//!
//! [archive]                        # leader-only: finished tasks and jobs move to history
//! enabled = true
//! interval = "10s"
//! after = "1h"                     # how long a finished task stays in the hot tables
//! keep = "90d"                     # history older than this is deleted; default: kept for ever
//! batch = 1000
//!
//! [server]                         # the server side: serve's scheduler, supervisor, archiver and API
//! enabled = true                   # false in a deployment that only enqueues (serve then refuses)
//! listen = "127.0.0.1:8080"        # the HTTP API's address; "off" for none (SHIFTBOSS_LISTEN, --listen)
//! body_limit = 1048576             # the largest request body, in bytes (413 beyond)
//! request_timeout = "30s"          # the longest one request may take (408 beyond)
//! max_in_flight = 1024             # requests served at once; more wait their turn
//! submit_writers = 4               # group commit: submission batches written at once (default: 1 on
//!                                  # SQLite, 4 on PostgreSQL; 0: each submission its own transaction)
//! admin_token_file = "shiftboss-admin.token"  # where the first admin token's secret goes
//!
//! [webhooks]                       # status channels: the dispatcher of the outbox's deliveries
//! concurrency = 64                 # deliveries in flight at once
//! call_timeout = "15s"             # one attempt, connect to answer
//! lease = "60s"                    # a claimed delivery is sent again after this if its dispatcher died
//! retry = { kind = "intervals", intervals = ["5s", "5m", "30m", "2h", "5h", "10h"] }  # then dead, with an alert
//!
//! [alerts]                         # the operator's alerts, sent by the supervisor role's alerter
//! fold = "10m"                     # repeats on one subject (a workflow's step, ...) within it: one summary
//! stuck_after = "1h"               # a running task with no progress this long is reported; "0s": never
//! stuck_scan = "1m"                # how often running tasks are looked at
//! call_timeout = "10s"             # one call to a sink's webhook
//! poll = "1s"                      # the wait after a read that found alerts; it doubles while none come
//! idle_poll = "30s"                # the longest wait between two reads of a quiet event log (a write
//!                                  # of this process, or work queued by another, wakes it within 100 ms)
//! queue = 1000                     # alerts a slow sink holds before it drops new ones
//! [[alerts.sinks]]                 # default: kind = "log" alone; listing sinks replaces it
//! kind = "log"                     # a warn line on the target shiftboss::alert
//! [[alerts.sinks]]
//! kind = "webhook"                 # the alert as JSON
//! name = "pager"
//! url = "https://ops.example.com/hooks/shiftboss"
//! secret = "whsec_..."             # optional: Standard Webhooks signature headers
//! [[alerts.sinks]]
//! kind = "slack"                   # {"text": ...}: Slack's, Mattermost's, ... incoming webhooks
//! url = "https://hooks.slack.com/services/..."  # never logged
//!
//! [client]                         # retry jobs: how `jobs enqueue` spreads them (M3, M8)
//! balance = "weighted"             # "hash" of the key (default), "round-robin" or "weighted"
//! shares = [{ buckets = "0-127", weight = 2 }, { buckets = "128-255", weight = 1 }]
//!
//! [outbound]                       # every call the engine sends out (HTTP agent steps, Conductor HTTP tasks)
//! allow = ["10.20.0.0/16", "127.0.0.1", "stock.internal"]  # opened past the SSRF guard (CIDRs, addresses, host names)
//! ca_bundle = "/etc/shiftboss/ca.pem"     # PEM CAs trusted besides the system's roots
//! client_cert = "/etc/shiftboss/client.pem"  # presented to servers that ask (mTLS), with client_key
//! client_key = "/etc/shiftboss/client.key"
//! secrets_dir = "/run/secrets"     # ${secret.NAME}: SHIFTBOSS_SECRET_NAME, else the file NAME here
//! max_response_bytes = 4194304     # a larger response body fails the step (permanent)
//! max_redirects = 5                # for steps that allow redirects (follow_redirects)
//! connect_timeout = "5s"
//! call_timeout = "60s"             # the whole call, within the step's complete-by
//!
//! [events]                         # the event agent: steps with "agent": "event" (docs/events.md)
//! nats_url = "nats://127.0.0.1:4222"  # the NATS server of nats: and jetstream: sinks, connected on first use
//!
//! [agents.stock]                   # an HTTP agent wrapping one service (a job handler is an agent)
//! base_url = "https://stock.internal:8443"
//! ca_bundle = "/etc/shiftboss/stock-ca.pem"  # this agent's TLS settings, instead of [outbound]'s
//! retry = { kind = "exponential", base = "1s", cap = "1m", jitter = 0.2, max_failures = 8 }
//! max_concurrent = 20              # at most 20 stock steps running at once, across every process
//! per_second = 100                 # at most 100 stock steps started per second, across every process
//! timeout = "30s"                  # the complete-by window of a job of this handler
//! ```
//!
//! Environment overrides besides those of the flags: `SHIFTBOSS_SERVER_ENABLED` (true or false)
//! and `SHIFTBOSS_CLIENT_BALANCE` (hash, round-robin or weighted). `SHIFTBOSS_OUTBOUND_ALLOW`
//! (comma-separated, as `serve --allow-outbound`) adds to `[outbound] allow`. `SHIFTBOSS_IDLE_POLL` and
//! `SHIFTBOSS_SUPERVISOR_IDLE_INTERVAL` are those of `serve --idle-poll` and
//! `--supervisor-idle-interval`.

use crate::target::StoreBounds;
use anyhow::Context;
use serde::Deserialize;
use shiftboss_core::buckets::parse_list;
use shiftboss_core::jobs::{Balance, Share};
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::time::serde_duration;
use shiftboss_engine::outbound::{AllowList, Limits, OutboundConfig, Secrets, TlsConfig};
use shiftboss_engine::{ClientConfig, HandlerDefaults, PollMode};
use shiftboss_events::EventsConfig;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub db: Option<String>,
    pub instance_id: Option<String>,
    pub roles: Option<Vec<Role>>,
    pub retry: Option<RetryPolicy>,
    #[serde(default)]
    pub store: StoreSection,
    #[serde(default)]
    pub scheduler: SchedulerSection,
    #[serde(default)]
    pub supervisor: SupervisorSection,
    #[serde(default)]
    pub archive: ArchiveSection,
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub client: ClientSection,
    #[serde(default)]
    pub outbound: OutboundSection,
    #[serde(default)]
    pub webhooks: WebhooksSection,
    #[serde(default)]
    pub alerts: AlertsSection,
    #[serde(default)]
    pub events: EventsSection,
    #[serde(default, alias = "handlers")]
    pub agents: BTreeMap<String, AgentSection>,
}

/// The status channels' dispatcher (its calls go out under `[outbound]`'s guard).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksSection {
    pub concurrency: Option<usize>,
    #[serde(default, with = "serde_duration::option")]
    pub call_timeout: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub lease: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub idle_poll: Option<Duration>,
    pub retry: Option<RetryPolicy>,
}

/// The operator's alerts (its sinks' calls go out under `[outbound]`'s guard).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsSection {
    #[serde(default, with = "serde_duration::option")]
    pub fold: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub stuck_after: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub stuck_scan: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub call_timeout: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub poll: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub idle_poll: Option<Duration>,
    pub queue: Option<usize>,
    pub sinks: Option<Vec<SinkSection>>,
}

/// One alert sink. Its `Debug` hides the url and the secret (see `SinkKind`'s).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkSection {
    pub kind: SinkKindName,
    /// How logs and metrics name it; the kind by default.
    pub name: Option<String>,
    pub url: Option<String>,
    /// A webhook sink's `whsec_` signing secret.
    pub secret: Option<String>,
}

impl std::fmt::Debug for SinkSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkSection")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("url", &self.url.as_ref().map(|_| "<hidden>"))
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKindName {
    Log,
    Webhook,
    Slack,
}

impl AlertsSection {
    /// The sinks as the engine takes them; none listed: the log alone.
    pub fn sinks(&self) -> anyhow::Result<Option<Vec<shiftboss_engine::alerts::SinkConfig>>> {
        use shiftboss_engine::alerts::{SinkConfig, SinkKind};
        let Some(list) = &self.sinks else { return Ok(None) };
        let mut out = Vec::new();
        for (i, s) in list.iter().enumerate() {
            let kind_name = match s.kind {
                SinkKindName::Log => "log",
                SinkKindName::Webhook => "webhook",
                SinkKindName::Slack => "slack",
            };
            let name = s.name.clone().unwrap_or_else(|| format!("{kind_name}-{}", i + 1));
            // The url is not quoted in errors: a chat webhook's path is its password.
            let url = || -> anyhow::Result<reqwest::Url> {
                let text =
                    s.url.as_deref().ok_or_else(|| anyhow::anyhow!("[[alerts.sinks]] {name}: url is required"))?;
                reqwest::Url::parse(text)
                    .map_err(|e| anyhow::anyhow!("[[alerts.sinks]] {name}: the url does not parse ({e})"))
            };
            let kind = match s.kind {
                SinkKindName::Log => {
                    anyhow::ensure!(
                        s.url.is_none() && s.secret.is_none(),
                        "[[alerts.sinks]] {name}: a log sink has no url or secret"
                    );
                    SinkKind::Log
                }
                SinkKindName::Webhook => SinkKind::Webhook { url: url()?, secret: s.secret.clone() },
                SinkKindName::Slack => {
                    anyhow::ensure!(
                        s.secret.is_none(),
                        "[[alerts.sinks]] {name}: a slack sink takes no secret (its url is one)"
                    );
                    SinkKind::Chat { url: url()? }
                }
            };
            out.push(SinkConfig { name, kind });
        }
        Ok(Some(out))
    }
}

/// Bounds on waiting for the state store (see `target::StoreBounds`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    #[serde(default, with = "serde_duration::option")]
    pub timeout: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub connect_timeout: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub wait: Option<Duration>,
}

/// The event agent's settings (its webhooks go out under `[outbound]`'s guard).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsSection {
    /// The NATS server (default `nats://127.0.0.1:4222`); it may hold a user and password.
    pub nats_url: Option<String>,
}

impl std::fmt::Debug for EventsSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry credentials, and configs get printed.
        let shown = self.nats_url.as_ref().map(|_| "[set]");
        f.debug_struct("EventsSection").field("nats_url", &shown).finish()
    }
}

/// Outbound calls: the SSRF guard's allow-list, TLS, secrets and bounds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundSection {
    #[serde(default)]
    pub allow: Vec<String>,
    pub ca_bundle: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub secrets_dir: Option<PathBuf>,
    pub max_response_bytes: Option<u64>,
    pub max_redirects: Option<u32>,
    #[serde(default, with = "serde_duration::option")]
    pub connect_timeout: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub call_timeout: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSection {
    pub enabled: Option<bool>,
    #[serde(default, with = "serde_duration::option")]
    pub interval: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub after: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub keep: Option<Duration>,
    pub batch: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub enabled: Option<bool>,
    /// Where the API listens ("127.0.0.1:8080" by default; "off" for none).
    pub listen: Option<String>,
    /// The largest request body, in bytes.
    pub body_limit: Option<usize>,
    /// How long one request may take.
    #[serde(default, with = "serde_duration::option")]
    pub request_timeout: Option<Duration>,
    /// Requests served at once.
    pub max_in_flight: Option<usize>,
    /// The group commit's writers (see `shiftboss_engine::SubmitConfig`).
    pub submit_writers: Option<usize>,
    /// Where the first admin token's secret is written when the store has no token.
    pub admin_token_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSection {
    pub balance: Option<String>,
    #[serde(default)]
    pub shares: Vec<ShareSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareSection {
    /// A bucket list such as "0-127,200".
    pub buckets: String,
    pub weight: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Scheduler,
    Supervisor,
    /// The HTTP API (and, with it, the first admin token when the store has none).
    Api,
    /// The status channels' webhooks: sends the outbox's deliveries.
    Dispatcher,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSection {
    pub concurrency: Option<u32>,
    pub min_concurrency: Option<u32>,
    pub max_per_poll: Option<u32>,
    #[serde(default, with = "serde_duration::option")]
    pub poll_interval: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub idle_poll: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub first_delay: Option<Duration>,
    pub poll_mode: Option<PollMode>,
    pub agents: Option<Vec<String>>,
    pub buckets: Option<String>,
    pub weight: Option<u32>,
    #[serde(default, with = "serde_duration::option")]
    pub heartbeat_ttl: Option<Duration>,
    pub domains: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisorSection {
    #[serde(default, with = "serde_duration::option")]
    pub interval: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub idle_interval: Option<Duration>,
    pub batch: Option<u32>,
    #[serde(default, with = "serde_duration::option")]
    pub leader_ttl: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub reconcile_interval: Option<Duration>,
    #[serde(default, with = "serde_duration::option")]
    pub stale_after: Option<Duration>,
}

/// An agent of the deployment: an HTTP agent wrapping the service at `base_url`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    pub base_url: String,
    pub retry: Option<RetryPolicy>,
    pub max_concurrent: Option<u32>,
    pub per_second: Option<u32>,
    #[serde(default, with = "serde_duration::option")]
    pub timeout: Option<Duration>,
    /// This agent's TLS settings; when any is given, they replace `[outbound]`'s for it.
    pub ca_bundle: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

impl FileConfig {
    pub fn load(path: &Path) -> anyhow::Result<FileConfig> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading the config file {}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))
    }

    /// The environment's overrides of settings that have no flag.
    pub fn apply_env(&mut self) -> anyhow::Result<()> {
        if let Ok(v) = std::env::var("SHIFTBOSS_SERVER_ENABLED") {
            let on =
                v.parse::<bool>().map_err(|_| anyhow::anyhow!("SHIFTBOSS_SERVER_ENABLED={v:?}: use true or false"))?;
            self.server.enabled = Some(on);
        }
        if let Ok(v) = std::env::var("SHIFTBOSS_CLIENT_BALANCE") {
            self.client.balance = Some(v);
        }
        Ok(())
    }

    /// The settings of outbound calls, with `extra_allow` (flags, environment) added to the
    /// file's allow-list.
    pub fn outbound(&self, extra_allow: &[String]) -> anyhow::Result<OutboundConfig> {
        let o = &self.outbound;
        let allow =
            AllowList::parse(o.allow.iter().chain(extra_allow)).map_err(|e| anyhow::anyhow!("[outbound] {e}"))?;
        let mut limits = Limits::default();
        if let Some(v) = o.max_response_bytes {
            limits.max_response_bytes = v;
        }
        if let Some(v) = o.max_redirects {
            limits.max_redirects = v;
        }
        if let Some(v) = o.connect_timeout {
            limits.connect_timeout = v;
        }
        if let Some(v) = o.call_timeout {
            limits.call_timeout = v;
        }
        Ok(OutboundConfig {
            allow,
            tls: TlsConfig {
                ca_bundle: o.ca_bundle.clone(),
                client_cert: o.client_cert.clone(),
                client_key: o.client_key.clone(),
            },
            secrets: Secrets { env: true, dir: o.secrets_dir.clone() },
            limits,
        })
    }

    /// The event agent's settings: the file's `[events]` over the defaults.
    pub fn events(&self) -> EventsConfig {
        let mut c = EventsConfig::default();
        if let Some(url) = &self.events.nats_url {
            c.nats_url = url.clone();
        }
        c
    }

    /// The store bounds: `flags` (flags and environment) over the file's `[store]`, over the defaults.
    pub fn store_bounds(&self, flags: &StoreSection) -> anyhow::Result<StoreBounds> {
        let d = StoreBounds::default();
        let pick = |flag: Option<Duration>, file: Option<Duration>, default| flag.or(file).unwrap_or(default);
        let b = StoreBounds {
            timeout: pick(flags.timeout, self.store.timeout, d.timeout),
            connect_timeout: pick(flags.connect_timeout, self.store.connect_timeout, d.connect_timeout),
            wait: pick(flags.wait, self.store.wait, d.wait),
        };
        if b.timeout < Duration::from_millis(100) || b.connect_timeout < Duration::from_millis(100) {
            anyhow::bail!("[store] timeout and connect_timeout must be at least 100ms");
        }
        Ok(b)
    }

    /// Whether this deployment runs the server side (serve's roles).
    pub fn server_enabled(&self) -> bool {
        self.server.enabled.unwrap_or(true)
    }

    /// The client side of retry jobs: the balance strategy and each handler's timeout.
    pub fn client(&self) -> anyhow::Result<ClientConfig> {
        let balance = match self.client.balance.as_deref() {
            None | Some("hash") => Balance::Hash,
            Some("round-robin") => Balance::RoundRobin,
            Some("weighted") => {
                let mut shares = Vec::new();
                for s in &self.client.shares {
                    let buckets =
                        parse_list(&s.buckets).map_err(|e| anyhow::anyhow!("[client] shares: {:?}: {e}", s.buckets))?;
                    shares.push(Share { buckets, weight: s.weight });
                }
                Balance::Weighted { shares }
            }
            Some(other) => anyhow::bail!("[client] balance {other:?}: use hash, round-robin or weighted"),
        };
        balance.validate().map_err(|e| anyhow::anyhow!("[client]: {e}"))?;
        let handlers = self
            .agents
            .iter()
            .map(|(name, a)| (name.clone(), HandlerDefaults { timeout: a.timeout, retry: a.retry.clone() }))
            .collect();
        Ok(ClientConfig { balance, handlers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_reads() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start_matches(' ')))
            .collect();
        let c: FileConfig = toml::from_str(&example).unwrap();
        assert_eq!(c.roles, Some(vec![Role::Scheduler, Role::Supervisor, Role::Api]));
        assert_eq!(c.server.listen.as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(c.server.request_timeout, Some(Duration::from_secs(30)));
        assert_eq!(c.scheduler.poll_mode, Some(PollMode::FixedDelay));
        assert_eq!(c.scheduler.poll_interval, Some(Duration::from_millis(500)));
        assert_eq!(c.scheduler.idle_poll, Some(Duration::from_secs(10)));
        assert_eq!(c.supervisor.idle_interval, Some(Duration::from_secs(10)));
        assert_eq!(c.scheduler.buckets.as_deref(), Some("share"));
        assert_eq!(c.scheduler.weight, Some(2));
        assert_eq!(c.agents["stock"].base_url, "https://stock.internal:8443");
        assert!(c.agents["stock"].ca_bundle.is_some());
        let out = c.outbound(&["192.168.7.0/24".to_owned()]).unwrap();
        assert!(out.allow.clone() != AllowList::default());
        assert_eq!(out.limits.max_redirects, 5);
        assert_eq!(out.limits.call_timeout, Duration::from_secs(60));
        assert_eq!(out.secrets.dir.as_deref(), Some(Path::new("/run/secrets")));
        assert!(c.outbound(&["not a host".to_owned()]).unwrap_err().to_string().contains("not a host"));
        assert!(matches!(c.agents["stock"].retry, Some(RetryPolicy::Exponential { .. })));
        assert_eq!(c.archive.after, Some(Duration::from_secs(3600)));
        assert_eq!(c.events().nats_url, "nats://127.0.0.1:4222");
        assert!(c.server_enabled());
        let client = c.client().unwrap();
        assert!(matches!(&client.balance, Balance::Weighted { shares } if shares.len() == 2 && shares[0].weight == 2));
        assert_eq!(client.handlers["stock"].timeout, Some(Duration::from_secs(30)));
    }

    #[test]
    fn handlers_is_another_name_for_agents_and_the_server_can_be_switched_off() {
        let c: FileConfig =
            toml::from_str("[server]\nenabled = false\n[handlers.mail]\nbase_url = \"http://127.0.0.1:1\"\n").unwrap();
        assert!(!c.server_enabled());
        assert!(c.agents.contains_key("mail"));
        let bad: FileConfig = toml::from_str("[client]\nbalance = \"weighted\"\n").unwrap();
        assert!(bad.client().unwrap_err().to_string().contains("share"), "weighted needs shares");
    }

    /// Bad `[alerts]` input is refused with a message that names the sink and the rule, and
    /// never quotes the url (a chat webhook's path is its password) or the secret.
    #[test]
    fn bad_alert_sinks_are_refused_without_echoing_their_url() {
        let sinks = |body: &str| {
            let c: FileConfig = toml::from_str(body).unwrap();
            c.alerts.sinks().map(|s| s.map(|v| v.len()))
        };
        let url_error = |url: &str| {
            let body = format!("[[alerts.sinks]]\nkind = \"slack\"\nname = \"ops\"\nurl = \"{url}\"\n");
            let c: FileConfig = toml::from_str(&body).unwrap();
            let mut sinks = c.alerts.sinks().unwrap().unwrap();
            let sink = sinks.pop().unwrap();
            sink.validate().unwrap_err()
        };
        let e = url_error("https://bot:hunter2@hooks.example.com/T000/B000");
        assert!(e.contains("ops") && e.contains("no user or password"), "{e}");
        assert!(!e.contains("hunter2") && !e.contains("hooks.example"), "{e}");
        let e = url_error("ftp://hooks.example.com/T000/secretpath");
        assert!(e.contains("http or https"), "{e}");
        assert!(!e.contains("secretpath"), "{e}");

        let e = sinks("[[alerts.sinks]]\nkind = \"slack\"\nurl = \"ht!tp://x y/zzsecret\"\n").unwrap_err().to_string();
        assert!(e.contains("slack-1") && e.contains("does not parse"), "{e}");
        assert!(!e.contains("zzsecret"), "{e}");
        let e = sinks("[[alerts.sinks]]\nkind = \"webhook\"\n").unwrap_err().to_string();
        assert!(e.contains("url is required"), "{e}");
        let e = sinks("[[alerts.sinks]]\nkind = \"log\"\nsecret = \"whsec_abc\"\n").unwrap_err().to_string();
        assert!(e.contains("no url or secret") && !e.contains("whsec_abc"), "{e}");
        let e = sinks("[[alerts.sinks]]\nkind = \"slack\"\nurl = \"https://h.example/x\"\nsecret = \"whsec_abc\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes no secret") && !e.contains("whsec_abc"), "{e}");
        let e = toml::from_str::<FileConfig>("[[alerts.sinks]]\nkind = \"pager\"\n").unwrap_err().to_string();
        assert!(e.contains("pager"), "{e}");
        assert_eq!(sinks("[alerts]\n").unwrap(), None, "no sinks listed: the default (the log)");

        // A config printed with {:?} shows neither the url nor the secret.
        let c: FileConfig = toml::from_str(
            "[[alerts.sinks]]\nkind = \"webhook\"\nurl = \"https://h.example/tok3n\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n",
        )
        .unwrap();
        let shown = format!("{c:?} {:?}", c.alerts.sinks().unwrap());
        assert!(!shown.contains("tok3n") && !shown.contains("MfKQ9r8"), "{shown}");
        assert!(shown.contains("Webhook"), "{shown}");
    }

    #[test]
    fn the_events_section_names_the_nats_server_and_never_shows_its_credentials() {
        let c: FileConfig = toml::from_str("").unwrap();
        assert_eq!(c.events().nats_url, shiftboss_events::DEFAULT_NATS_URL);
        let c: FileConfig = toml::from_str("[events]\nnats_url = \"nats://svc:hunter2@nats.internal:4222\"\n").unwrap();
        assert_eq!(c.events().nats_url, "nats://svc:hunter2@nats.internal:4222");
        assert!(!format!("{c:?}").contains("hunter2"));
        let e = toml::from_str::<FileConfig>("[events]\nnats = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("nats"), "{e}");
    }

    #[test]
    fn mistakes_are_named() {
        let e = toml::from_str::<FileConfig>("[scheduler]\nconcurency = 3\n").unwrap_err().to_string();
        assert!(e.contains("concurency"), "{e}");
        let e = toml::from_str::<FileConfig>("roles = [\"cook\"]\n").unwrap_err().to_string();
        assert!(e.contains("cook"), "{e}");
        let e = toml::from_str::<FileConfig>("[supervisor]\ninterval = \"often\"\n").unwrap_err().to_string();
        assert!(e.contains("often"), "{e}");
    }
}
