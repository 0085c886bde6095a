//! The agent's one connection to NATS, made on first use so that `serve` starts while NATS is
//! down (its steps then fail transiently, and are retried), and its publishes, every wait bounded.
//!
//! Once made, the client reconnects by itself after a loss; a publish meanwhile waits in its
//! buffer, and the flush or the ack that confirms it is what the bound cuts short.

use async_nats::jetstream::{self, context::PublishErrorKind};
use async_nats::{Client, ConnectOptions, HeaderMap, ServerAddr};
use std::future::Future;
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio::time::Instant;

/// The header JetStream drops duplicates by (within the stream's duplicate window).
const MSG_ID: &str = "Nats-Msg-Id";

/// What a wait was for, as errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Connect,
    Publish,
    Flush,
    Ack,
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Wait::Connect => "connection",
            Wait::Publish => "publish",
            Wait::Flush => "flush (the server's confirmation of the publish)",
            Wait::Ack => "JetStream acknowledgement",
        })
    }
}

/// Why a publish did not happen, or was not confirmed. `server` is host:port, never credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NatsError {
    #[error("the NATS server {server} is unreachable: {reason}")]
    Unreachable { server: String, reason: String },
    #[error("NATS server {server}: no {what} within {waited:?}")]
    TimedOut { server: String, what: Wait, waited: Duration },
    #[error("NATS server {server}: {what} failed: {reason}")]
    Failed { server: String, what: Wait, reason: String },
    /// The message itself is refused (too large, a subject the client will not send to).
    #[error("NATS server {server}: the message is refused: {reason}")]
    Refused { server: String, reason: String },
    #[error(
        "no JetStream stream on the NATS server {server} captures the subject {subject:?} (add it to a stream's subjects)"
    )]
    NoStream { server: String, subject: String },
}

impl NatsError {
    /// Whether trying again may help: an outage or a slow server may pass; a refused message or a
    /// subject no stream captures will not.
    pub fn is_transient(&self) -> bool {
        !matches!(self, NatsError::Refused { .. } | NatsError::NoStream { .. })
    }
}

/// A stored JetStream message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub stream: String,
    pub sequence: u64,
    /// The stream already had a message with this id: an earlier attempt's publish got through.
    pub duplicate: bool,
}

/// A connection's settings that a bad value of would stop `serve` from starting.
#[derive(Debug, thiserror::Error)]
#[error("nats_url: not a NATS server URL (nats://host:port, tls://host:port): {0}")]
pub struct BadUrl(String);

struct Connection {
    client: Client,
    /// Made once: each context runs a task of its own that collects abandoned acks.
    jetstream: jetstream::Context,
}

pub struct Nats {
    addr: ServerAddr,
    server: String,
    connect_timeout: Duration,
    timeout: Duration,
    conn: OnceCell<Connection>,
}

impl std::fmt::Debug for Nats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nats").field("server", &self.server).field("connected", &self.conn.initialized()).finish()
    }
}

impl Nats {
    /// Checks the URL; connects on the first publish. `timeout` bounds each wait after the
    /// connection (publish, flush, ack); `connect_timeout` bounds making it.
    pub fn new(url: &str, connect_timeout: Duration, timeout: Duration) -> Result<Nats, BadUrl> {
        // The URL may hold credentials: the error quotes the parser, not the URL.
        let addr: ServerAddr = url.parse().map_err(|e: std::io::Error| BadUrl(e.to_string()))?;
        let server = format!("{}:{}", addr.host(), addr.port());
        Ok(Nats { addr, server, connect_timeout, timeout, conn: OnceCell::new() })
    }

    /// host:port of the server.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// A core NATS publish with the id header, flushed: the server has it on return.
    pub async fn publish(&self, subject: &str, msg_id: &str, payload: Vec<u8>, end: Instant) -> Result<(), NatsError> {
        let conn = self.connection(end).await?;
        let publish = conn.client.publish_with_headers(subject.to_owned(), id_header(msg_id), payload.into());
        self.bounded(Wait::Publish, end, publish).await?.map_err(|e| {
            use async_nats::client::PublishErrorKind as K;
            match e.kind() {
                K::MaxPayloadExceeded | K::InvalidSubject => self.refused(&e),
                K::Send => self.failed(Wait::Publish, &e),
            }
        })?;
        self.bounded(Wait::Flush, end, conn.client.flush()).await?.map_err(|e| self.failed(Wait::Flush, &e))
    }

    /// A JetStream publish, waited for until the stream acknowledges (stores) it.
    pub async fn publish_durable(
        &self,
        subject: &str,
        msg_id: &str,
        payload: Vec<u8>,
        end: Instant,
    ) -> Result<Ack, NatsError> {
        let conn = self.connection(end).await?;
        let publish = conn.jetstream.publish_with_headers(subject.to_owned(), id_header(msg_id), payload.into());
        let pending =
            self.bounded(Wait::Publish, end, publish).await?.map_err(|e| self.jetstream_error(subject, &e))?;
        let ack = self.bounded(Wait::Ack, end, pending.into_future()).await?;
        let ack = ack.map_err(|e| self.jetstream_error(subject, &e))?;
        Ok(Ack { stream: ack.stream, sequence: ack.sequence, duplicate: ack.duplicate })
    }

    async fn connection(&self, end: Instant) -> Result<&Connection, NatsError> {
        let wait_end = end.min(Instant::now() + self.connect_timeout);
        let left = wait_end.saturating_duration_since(Instant::now());
        let connect = self.conn.get_or_try_init(|| async {
            let client = ConnectOptions::new()
                .name("shiftboss")
                .connection_timeout(left.max(Duration::from_millis(1)))
                .connect(self.addr.clone())
                .await
                .map_err(|e| NatsError::Unreachable { server: self.server.clone(), reason: e.to_string() })?;
            let jetstream = jetstream::ContextBuilder::new().timeout(self.timeout).build(client.clone());
            Ok(Connection { client, jetstream })
        });
        let conn = self.bounded(Wait::Connect, wait_end, connect).await.and_then(|r| r);
        if let Err(e) = &conn {
            // The runtime keeps a transient error to itself (the step records only that its lease
            // lapsed): an operator learns that NATS is down from this line.
            tracing::warn!(error = %e, "event agent: no connection to NATS");
        }
        conn
    }

    /// `fut` until `end` or this connection's timeout, whichever comes first.
    async fn bounded<T>(&self, what: Wait, end: Instant, fut: impl Future<Output = T>) -> Result<T, NatsError> {
        let start = Instant::now();
        let end = end.min(start + self.timeout);
        tokio::time::timeout_at(end, fut).await.map_err(|_| NatsError::TimedOut {
            server: self.server.clone(),
            what,
            waited: end.saturating_duration_since(start),
        })
    }

    fn jetstream_error(&self, subject: &str, e: &jetstream::context::PublishError) -> NatsError {
        match e.kind() {
            PublishErrorKind::StreamNotFound => {
                NatsError::NoStream { server: self.server.clone(), subject: subject.to_owned() }
            }
            PublishErrorKind::MaxPayloadExceeded | PublishErrorKind::WrongLastMessageId => self.refused(e),
            PublishErrorKind::WrongLastSequence => self.refused(e),
            PublishErrorKind::TimedOut => {
                NatsError::TimedOut { server: self.server.clone(), what: Wait::Ack, waited: self.timeout }
            }
            // A broken connection, too many acks pending, or the stream's own refusal (full,
            // no leader): each may pass, and the retry policy bounds the tries.
            PublishErrorKind::BrokenPipe | PublishErrorKind::MaxAckPending | PublishErrorKind::Other => {
                self.failed(Wait::Ack, e)
            }
        }
    }

    fn refused(&self, e: &dyn std::error::Error) -> NatsError {
        NatsError::Refused { server: self.server.clone(), reason: describe(e) }
    }

    fn failed(&self, what: Wait, e: &dyn std::error::Error) -> NatsError {
        NatsError::Failed { server: self.server.clone(), what, reason: describe(e) }
    }
}

fn id_header(msg_id: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(MSG_ID, msg_id);
    h
}

/// An error with its causes, which the client keeps apart (`publish failed: ...`).
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text = format!("{text}: {c_text}");
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_without_echoing_credentials() {
        let n = Nats::new("nats://127.0.0.1:4222", Duration::from_secs(1), Duration::from_secs(1)).unwrap();
        assert_eq!(n.server(), "127.0.0.1:4222");
        let n =
            Nats::new("nats://user:pa55w0rd@nats.internal", Duration::from_secs(1), Duration::from_secs(1)).unwrap();
        assert_eq!(n.server(), "nats.internal:4222");
        assert!(!format!("{n:?}").contains("pa55w0rd"));
        let e = Nats::new("nats://user:pa55w0rd@[bad", Duration::from_secs(1), Duration::from_secs(1)).unwrap_err();
        assert!(!e.to_string().contains("pa55w0rd"), "{e}");
        assert!(e.to_string().contains("nats_url"), "{e}");
    }

    #[test]
    fn faults_are_sorted() {
        let s = || "h:1".to_owned();
        assert!(NatsError::Unreachable { server: s(), reason: "refused".into() }.is_transient());
        assert!(NatsError::TimedOut { server: s(), what: Wait::Flush, waited: Duration::ZERO }.is_transient());
        assert!(!NatsError::NoStream { server: s(), subject: "a".into() }.is_transient());
        assert!(!NatsError::Refused { server: s(), reason: "too large".into() }.is_transient());
    }
}
