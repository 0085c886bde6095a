//! `chaos --failover`: a replicated PostgreSQL of the harness's own, failed over again and again
//! (issue 26). Two clusters on spare loopback ports in the work directory, made with the server's
//! own tools (`initdb`, `pg_basebackup`): a primary and a synchronous standby. A failover crashes
//! the primary (SIGKILL of its processes) or freezes it (SIGSTOP), promotes the standby, and
//! measures the time from the promotion to the first step completed on the promoted server. Then
//! the old primary is killed for good and made again as a standby of the new one, so that the next
//! failover finds a synchronous standby again.
//!
//! Synchronous replication the way HA managers run it (Patroni's non-strict synchronous mode): a
//! primary waits for its standby; a promoted one stands alone until its new standby streams, then
//! waits for it again. No failover is injected while a primary stands alone, so no acknowledged
//! commit can be lost, and the run checks exactly that.
//!
//! Under root the server binaries run as `postgres` (initdb refuses root).

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How a failover takes the primary away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// SIGKILL of every process of the primary: its connections are reset at once.
    Crash,
    /// SIGSTOP of every process: its sockets stay open and nothing answers, as a hung host or a
    /// network partition does; only the store's bounds get a process past it.
    Freeze,
}

/// One failover, as measured.
#[derive(Debug, Clone, Copy)]
pub struct Failover {
    pub outage: Outage,
    /// From the promotion to the first step completed on the promoted server.
    pub first_step: Duration,
}

/// Two clusters, one the primary; stopped and removed on drop.
pub struct Replicas {
    bin: PathBuf,
    dir: PathBuf,
    ports: [u16; 2],
    primary: usize,
    schema: String,
}

impl Replicas {
    /// Makes the primary (node 0) and its synchronous standby (node 1) under `dir`, for a store in
    /// `schema`.
    pub fn start(dir: &Path, schema: &str) -> anyhow::Result<Replicas> {
        let bin = pg_bin().context(
            "--failover runs PostgreSQL clusters of its own and needs the server's binaries \
             (/usr/lib/postgresql/*/bin/initdb; Debian's postgresql package)",
        )?;
        let dir = dir.join("replicas");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(&dir))?;
        }
        // TCP only: a killed postmaster's Unix socket lock file would keep a server from starting
        // on its port again while the dead process lingers unreaped (a container's init may not
        // reap), and the old primary is started again on its port as the new standby.
        let r = Replicas { bin, dir, ports: [free_port()?, free_port()?], primary: 0, schema: schema.to_owned() };
        let data = r.data(0);
        r.as_postgres("initdb", &["-D", path(&data)?, "-U", "postgres", "-A", "trust", "--no-sync"])?;
        let conf = format!(
            "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nwal_level = replica\n\
             max_wal_senders = 5\nsynchronous_commit = on\nfsync = off\nmax_connections = 100\n\
             shared_buffers = 64MB\nwal_keep_size = 256MB\n",
            r.ports[0],
        );
        append(&data.join("postgresql.conf"), &conf)?;
        r.pg_ctl(0, "start")?;
        r.attach_standby(1)?;
        Ok(r)
    }

    /// The URL every process uses: both hosts, the writable one chosen (`target_session_attrs`).
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.ports[0], self.ports[1]
        )
    }

    /// Takes the primary away, promotes the standby, waits for the first step completed after the
    /// promotion (at most `wait`), then makes the old primary a synchronous standby again.
    pub fn fail_over(&mut self, outage: Outage, wait: Duration) -> anyhow::Result<Failover> {
        let (old, new) = (self.primary, 1 - self.primary);
        let pids = cluster_pids(&self.data(old));
        if pids.len() < 2 {
            bail!("the primary on port {} is not running", self.ports[old]);
        }
        signal_all(&pids, if outage == Outage::Crash { "KILL" } else { "STOP" });
        let before = self.processed(new).context("reading the standby before its promotion")?;
        self.pg_ctl(new, "promote")?;
        let promoted = Instant::now();
        self.primary = new;
        // The promoted server stands alone until its new standby streams (see the module's doc).
        self.set_synchronous(new, "")?;
        let first_step = loop {
            if self.processed(new).is_ok_and(|n| n > before) {
                break promoted.elapsed();
            }
            if promoted.elapsed() > wait {
                let live = self.psql(
                    new,
                    &format!("SELECT count(*) FROM {}.steps WHERE state IN ('pending', 'processing')", self.schema),
                )?;
                bail!("no step completed within {wait:?} of the promotion ({live} steps pending or processing)");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The old primary never comes back as a primary: a frozen one woken would be a second
        // writable server.
        signal_all(&pids, "KILL");
        wait_gone(&pids, Duration::from_secs(10))?;
        std::fs::remove_dir_all(self.data(old)).context("removing the old primary's data")?;
        self.attach_standby(old)?;
        Ok(Failover { outage, first_step })
    }

    /// Makes node `i` a streaming standby of the primary and, once it streams, makes the primary's
    /// commits wait for it.
    fn attach_standby(&self, i: usize) -> anyhow::Result<()> {
        let p = self.primary;
        let data = self.data(i);
        let conninfo = format!("host=127.0.0.1 port={} user=postgres application_name=node{i}", self.ports[p]);
        self.as_postgres("pg_basebackup", &["-D", path(&data)?, "-R", "-X", "stream", "-c", "fast", "-d", &conninfo])?;
        // Later lines win: its own port, and no wait for a standby of its own once promoted.
        append(&data.join("postgresql.conf"), &format!("port = {}\n", self.ports[i]))?;
        append(&data.join("postgresql.auto.conf"), "synchronous_standby_names = ''\n")?;
        self.pg_ctl(i, "start")?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.psql(p, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")? != "1" {
            if Instant::now() > deadline {
                bail!("the standby on port {} did not stream within 60 s", self.ports[i]);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.set_synchronous(p, "*")?;
        while self.psql(p, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")? != "1" {
            if Instant::now() > deadline {
                bail!("the standby on port {} did not become synchronous within 60 s", self.ports[i]);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Steps completed on node `i`, hot and archived (an archive pass moves them in one
    /// transaction, so the sum only grows).
    fn processed(&self, i: usize) -> anyhow::Result<i64> {
        let s = &self.schema;
        let n = self.psql(
            i,
            &format!(
                "SELECT (SELECT count(*) FROM {s}.steps WHERE state = 'processed') \
                      + (SELECT count(*) FROM {s}.steps_history WHERE state = 'processed')"
            ),
        )?;
        n.parse().with_context(|| format!("a count from node {i}: {n:?}"))
    }

    /// Sets node `i`'s `synchronous_standby_names` and reloads its configuration (ALTER SYSTEM
    /// runs outside a transaction, so a statement of its own).
    fn set_synchronous(&self, i: usize, names: &str) -> anyhow::Result<()> {
        self.psql(i, &format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"))?;
        self.psql(i, "SELECT pg_reload_conf()").map(|_| ())
    }

    fn psql(&self, i: usize, sql: &str) -> anyhow::Result<String> {
        let mut c = Command::new("psql");
        c.args(["-h", "127.0.0.1", "-p", &self.ports[i].to_string(), "-U", "postgres", "-d", "postgres"]);
        c.args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql]);
        c.env("PGCONNECT_TIMEOUT", "5");
        let out = c.output().context("running psql")?;
        if !out.status.success() {
            bail!("psql on port {}: {}", self.ports[i], String::from_utf8_lossy(&out.stderr).trim());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text.lines().last().unwrap_or("").trim().to_owned())
    }

    fn data(&self, i: usize) -> PathBuf {
        self.dir.join(format!("node{i}"))
    }

    fn pg_ctl(&self, i: usize, what: &str) -> anyhow::Result<()> {
        let data = self.data(i);
        let log = data.with_extension("log");
        self.as_postgres("pg_ctl", &["-D", path(&data)?, "-l", path(&log)?, "-w", "-t", "60", what]).with_context(
            || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!("the server's log ends:\n{}", lines[lines.len().saturating_sub(15)..].join("\n"))
            },
        )
    }

    fn as_postgres(&self, tool: &str, args: &[&str]) -> anyhow::Result<()> {
        let mut c = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join(tool));
            c
        } else {
            Command::new(self.bin.join(tool))
        };
        run(c.args(args))
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        for i in 0..2 {
            let pids = cluster_pids(&self.data(i));
            signal_all(&pids, "KILL");
            let _ = wait_gone(&pids, Duration::from_secs(10));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(c: &mut Command) -> anyhow::Result<()> {
    let out = c.output().with_context(|| format!("running {c:?}"))?;
    if !out.status.success() {
        bail!(
            "{c:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn path(p: &Path) -> anyhow::Result<&str> {
    p.to_str().with_context(|| format!("{} is not UTF-8", p.display()))
}

/// The newest installed server's binaries.
fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn append(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).with_context(|| format!("{}", path.display()))?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

/// The postmaster's pid and its children's: every process of one cluster.
fn cluster_pids(data: &Path) -> Vec<i32> {
    let Ok(text) = std::fs::read_to_string(data.join("postmaster.pid")) else { return Vec::new() };
    let Some(main) = text.lines().next().and_then(|l| l.trim().parse::<i32>().ok()) else { return Vec::new() };
    let mut pids = vec![main];
    let Ok(procs) = std::fs::read_dir("/proc") else { return pids };
    for e in procs.filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The parent pid is the second field after the command name's closing parenthesis.
        let Some((_, after)) = stat.rsplit_once(')') else { continue };
        if after.split_whitespace().nth(1).and_then(|p| p.parse::<i32>().ok()) == Some(main) {
            pids.push(pid);
        }
    }
    pids
}

fn signal_all(pids: &[i32], sig: &str) {
    for p in pids {
        let _ = Command::new("kill")
            .args([&format!("-{sig}"), &p.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Waits until none of `pids` exists (a killed postmaster's shared memory and port are free).
fn wait_gone(pids: &[i32], within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while pids.iter().any(|p| Path::new(&format!("/proc/{p}")).exists() && !is_zombie(*p)) {
        if Instant::now() > deadline {
            bail!("processes {pids:?} still alive {within:?} after SIGKILL");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, a)| a.split_whitespace().next().map(|st| st == "Z")))
        .unwrap_or(false)
}
