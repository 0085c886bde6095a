//! A TCP proxy of the test's own between a process and the shared PostgreSQL server, so that a
//! test can take the database away from that process without touching the server others use.

use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Bytes flow both ways.
    Open,
    /// Connections are closed, and new ones closed at once: the database looks down.
    Cut,
    /// Connections stay open and new ones are taken, but nothing passes either way: the database
    /// (or the network) looks silent, so every call waits.
    Silent,
}

pub struct Proxy {
    /// Where the process under test connects.
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
}

impl Proxy {
    /// A proxy on a free loopback port to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, rx) = watch::channel(Mode::Open);
        tokio::spawn(accept(listener, upstream, rx));
        Proxy { addr, mode }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// Rewrites a database URL (with an explicit `host:port`) to go through this proxy.
    pub fn url(&self, url: &str, upstream: &str) -> String {
        assert!(url.contains(upstream), "the test database URL {url} names no {upstream}");
        url.replacen(upstream, &self.addr.to_string(), 1)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.mode.send_replace(Mode::Cut);
    }
}

/// The `host:port` of a database URL, as the proxy's upstream.
pub fn upstream_of(url: &str) -> String {
    let config: tokio_postgres::Config = url.parse().expect("the test database URL parses");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        other => panic!("the proxy needs a TCP host in the test database URL, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// Accepts until the proxy is dropped; while cut, a new connection is closed at once (the
/// database looks down), and once open again connections pass again.
async fn accept(listener: TcpListener, upstream: String, mut mode: watch::Receiver<Mode>) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        let Ok((client, _)) = conn else { continue };
        if *mode.borrow() == Mode::Cut {
            drop(client);
            continue;
        }
        tokio::spawn(relay(client, upstream.clone(), mode.clone()));
    }
}

/// One connection: opened upstream and relayed while the mode is open; silent, it is held with
/// nothing passing; cut, both sides are closed.
async fn relay(client: TcpStream, upstream: String, mut mode: watch::Receiver<Mode>) {
    if *mode.borrow() != Mode::Open {
        let _ = mode.wait_for(|m| *m == Mode::Cut).await;
        return;
    }
    let Ok(server) = TcpStream::connect(&upstream).await else { return };
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let (m1, m2) = (mode.clone(), mode.clone());
    tokio::select! {
        _ = pump(&mut cr, &mut sw, m1) => {}
        _ = pump(&mut sr, &mut cw, m2) => {}
        _ = mode.wait_for(|m| *m == Mode::Cut) => {}
    }
    // Dropped here: both sockets close.
}

async fn pump(
    from: &mut (impl AsyncReadExt + Unpin),
    to: &mut (impl AsyncWriteExt + Unpin),
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            r = from.read(&mut buf) => Some(r),
            _ = mode.wait_for(|m| *m != Mode::Open) => None,
        };
        let n = match read {
            Some(Ok(0) | Err(_)) => return,
            Some(Ok(n)) if *mode.borrow() == Mode::Open => n,
            // Silent: stop reading and writing, and hold the sockets until cut.
            _ => {
                let _ = mode.wait_for(|m| *m == Mode::Cut).await;
                return;
            }
        };
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
