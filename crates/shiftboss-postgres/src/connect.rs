//! Connecting host by host, each within its own bound (P11: a replicated PostgreSQL fails over).
//!
//! A URL may name several hosts (`postgres://u@h1:5433,h2:5434/db?target_session_attrs=read-write`):
//! tokio-postgres tries them in turn, but its `connect_timeout` bounds only the TCP connect. A
//! primary whose processes are stopped (SIGSTOP, a hung VM) still accepts TCP connections in its
//! kernel and never answers the startup message, so the first host would hold the whole attempt
//! until the pool's create timeout ran out, and the promoted standby behind it would never be
//! tried. Here each host gets a configuration of its own and `connect_timeout` for everything:
//! TCP, the startup and authentication exchange, and the `target_session_attrs` check.
//!
//! The hosts are tried from the one the last connection reached ([`Hosts`]), and, once a call on
//! it went unanswered, from the one after it: after a failover the frozen old primary would
//! otherwise cost every new connection its whole connect bound before the promoted standby
//! behind it is tried.

use deadpool_postgres::Connect;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_postgres::config::Host;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{Client, Config, Connection, NoTls, Socket};

/// Which host of the URL a connection tries first.
#[derive(Debug, Default)]
pub struct Hosts {
    /// The host the last connection reached.
    last_good: AtomicUsize,
    /// The host the next connection tries first.
    first: AtomicUsize,
}

impl Hosts {
    /// A call went unanswered: the next connection tries first the host after the one the last
    /// connection reached (the same answer however many calls report it at once).
    pub fn suspect(&self, config: &Config) {
        let n = host_count(config);
        self.first.store((self.last_good.load(Ordering::Relaxed) + 1) % n, Ordering::Relaxed);
    }

    fn reached(&self, i: usize) {
        self.last_good.store(i, Ordering::Relaxed);
        self.first.store(i, Ordering::Relaxed);
    }
}

/// The pool's connector: every new connection goes through [`connect`].
pub struct PerHost {
    /// The bound on one host's attempt.
    pub timeout: Duration,
    pub hosts: Arc<Hosts>,
}

impl Connect for PerHost {
    fn connect(&self, config: &Config) -> BoxFuture<'_, Result<(Client, JoinHandle<()>), tokio_postgres::Error>> {
        let config = config.clone();
        let (timeout, hosts) = (self.timeout, self.hosts.clone());
        Box::pin(async move {
            let (client, connection) = connect(&config, timeout, &hosts).await?;
            let driver = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "a database connection ended");
                }
            });
            // Before the connection draws an id: a server promoted since the store's last
            // connection raises its sequences above every id of its former timeline.
            bounded(client.batch_execute(RAISE_ID_FLOORS), timeout).await?;
            Ok((client, driver))
        })
    }
}

/// Raises the store's sequences to the server's timeline's floor (migration 16), where the schema
/// has that function: a connection made before the first migration has nothing to raise.
const RAISE_ID_FLOORS: &str = "DO $$ BEGIN
    IF to_regprocedure('raise_id_floors(text)') IS NOT NULL THEN
        PERFORM raise_id_floors(current_schema());
    END IF;
END $$";

/// How many hosts `config` names (at least one: with none, tokio-postgres's own default applies).
pub fn host_count(config: &Config) -> usize {
    config.get_hosts().len().max(1)
}

/// Connects to the first of `config`'s hosts that answers within `timeout`, in order from the one
/// `hosts` names.
pub async fn connect(
    config: &Config,
    timeout: Duration,
    hosts: &Hosts,
) -> Result<(Client, Connection<Socket, NoTlsStream>), tokio_postgres::Error> {
    let count = config.get_hosts().len();
    if count <= 1 {
        return bounded(config.connect(NoTls), timeout).await;
    }
    let start = hosts.first.load(Ordering::Relaxed) % count;
    let mut last = None;
    for i in (start..count).chain(0..start) {
        let one = one_host(config, i);
        match bounded(one.connect(NoTls), timeout).await {
            Ok(c) => {
                hosts.reached(i);
                return Ok(c);
            }
            Err(e) => {
                tracing::warn!(host = %describe(config, i), error = %e, "database host skipped");
                last = Some(e);
            }
        }
    }
    Err(last.expect("at least two hosts were tried"))
}

async fn bounded<T>(
    f: impl Future<Output = Result<T, tokio_postgres::Error>>,
    timeout: Duration,
) -> Result<T, tokio_postgres::Error> {
    match tokio::time::timeout(timeout, f).await {
        Ok(r) => r,
        // tokio-postgres has no public constructor for its errors; this one is what it exports for
        // its own timeouts ("timeout waiting for server"), and `error::pool_err` reports it as the
        // store being out of reach.
        Err(_) => Err(tokio_postgres::Error::__private_api_timeout()),
    }
}

/// Host `i` of `config` and its port, for a log line.
fn describe(config: &Config, i: usize) -> String {
    let host = match &config.get_hosts()[i] {
        Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        Host::Unix(p) => p.display().to_string(),
    };
    match port_of(config, i) {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }
}

fn port_of(config: &Config, i: usize) -> Option<u16> {
    let ports = config.get_ports();
    match ports.len() {
        0 => None,
        1 => Some(ports[0]),
        _ => ports.get(i).copied(),
    }
}

/// `config` with host `i` alone (its address and port as the URL pairs them): every other setting
/// is carried over, so that each host is connected to exactly as the whole list would be.
fn one_host(config: &Config, i: usize) -> Config {
    let mut c = Config::new();
    match &config.get_hosts()[i] {
        Host::Tcp(h) => c.host(h),
        #[cfg(unix)]
        Host::Unix(p) => c.host_path(p),
    };
    if let Some(addr) = config.get_hostaddrs().get(i) {
        c.hostaddr(*addr);
    }
    if let Some(p) = port_of(config, i) {
        c.port(p);
    }
    if let Some(u) = config.get_user() {
        c.user(u);
    }
    if let Some(p) = config.get_password() {
        c.password(p);
    }
    if let Some(d) = config.get_dbname() {
        c.dbname(d);
    }
    if let Some(o) = config.get_options() {
        c.options(o);
    }
    if let Some(a) = config.get_application_name() {
        c.application_name(a);
    }
    c.ssl_mode(config.get_ssl_mode());
    c.ssl_negotiation(config.get_ssl_negotiation());
    if let Some(t) = config.get_connect_timeout() {
        c.connect_timeout(*t);
    }
    if let Some(t) = config.get_tcp_user_timeout() {
        c.tcp_user_timeout(*t);
    }
    c.keepalives(config.get_keepalives());
    c.keepalives_idle(config.get_keepalives_idle());
    if let Some(t) = config.get_keepalives_interval() {
        c.keepalives_interval(t);
    }
    if let Some(r) = config.get_keepalives_retries() {
        c.keepalives_retries(r);
    }
    c.target_session_attrs(config.get_target_session_attrs());
    c.channel_binding(config.get_channel_binding());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_keeps_its_port_and_every_setting() {
        let config: Config = "postgres://app:pw@h1:5433,h2:5434/orders?target_session_attrs=read-write\
                              &application_name=x&connect_timeout=3&options=-c%20a%3Db"
            .parse()
            .unwrap();
        let second = one_host(&config, 1);
        assert_eq!(second.get_hosts(), &[Host::Tcp("h2".into())]);
        assert_eq!(second.get_ports(), &[5434]);
        assert_eq!(second.get_user(), Some("app"));
        assert_eq!(second.get_password(), Some(&b"pw"[..]));
        assert_eq!(second.get_dbname(), Some("orders"));
        assert_eq!(second.get_application_name(), Some("x"));
        assert_eq!(second.get_options(), Some("-c a=b"));
        assert_eq!(second.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(second.get_target_session_attrs(), tokio_postgres::config::TargetSessionAttrs::ReadWrite);
        assert_eq!(describe(&config, 0), "h1:5433");
        // One port for several hosts applies to each.
        let config: Config = "host=a,b port=6000 user=u".parse().unwrap();
        assert_eq!(one_host(&config, 0).get_ports(), &[6000]);
        assert_eq!(one_host(&config, 1).get_hosts(), &[Host::Tcp("b".into())]);
        assert_eq!(host_count(&config), 2);
    }
}
