//! The faults the harness injects, chosen from its seed, and the ones that act on PostgreSQL
//! itself (`pg_terminate_backend`, a restart of the server).

use anyhow::{Context, bail};
use shiftboss_store::fault::FaultPoint;
use std::process::Command;
use std::time::Duration;

/// One fault to inject now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// SIGKILL a running worker at a random moment.
    Kill,
    /// SIGKILL the worker that holds the supervisors' leader lease: a forced leader change.
    KillLeader,
    /// SIGSTOP a running worker for longer than any step's complete-by and the leader lease, then
    /// SIGCONT: its leases lapse and are retried elsewhere while it sleeps; what it sends when it
    /// wakes must be refused.
    Pause,
    /// Terminate every connection of the workers with `pg_terminate_backend`.
    TerminateConnections,
    /// Restart the PostgreSQL server.
    RestartPostgres,
    /// Crash or freeze the primary of the harness's own replicated PostgreSQL and promote its
    /// synchronous standby (`--failover`).
    Failover,
}

/// Which faults apply to this run.
#[derive(Debug, Clone, Copy)]
pub struct Menu {
    pub postgres: bool,
    pub restart_postgres: bool,
    /// The store is the harness's own primary and standby (`--failover`).
    pub failover: bool,
    pub workers: usize,
}

impl Menu {
    /// A weighted choice; faults that need PostgreSQL, or more than one worker, only where they do.
    pub fn pick(&self, rng: &mut fastrand::Rng) -> Fault {
        let mut choices: Vec<(Fault, u32)> = vec![(Fault::Kill, 4), (Fault::Pause, 2)];
        if self.postgres {
            choices.push((Fault::TerminateConnections, 2));
            if self.workers > 1 {
                choices.push((Fault::KillLeader, 2));
            }
            if self.restart_postgres {
                choices.push((Fault::RestartPostgres, 1));
            }
            if self.failover {
                choices.push((Fault::Failover, 4));
            }
        }
        let total: u32 = choices.iter().map(|(_, w)| w).sum();
        let mut roll = rng.u32(0..total);
        for (f, w) in &choices {
            if roll < *w {
                return *f;
            }
            roll -= w;
        }
        Fault::Kill
    }

    /// The point a restarted worker is armed to die at, if any: most restarts are armed, so that
    /// deaths at the exact points (before a call, after it, around a commit) happen all run long.
    pub fn arm(&self, rng: &mut fastrand::Rng) -> Option<(FaultPoint, u64)> {
        if rng.f64() < 0.3 {
            return None;
        }
        let point = FaultPoint::ALL[rng.usize(0..FaultPoint::ALL.len())];
        // Commits are far more frequent than calls: reach deeper into the run for them.
        let n = match point {
            FaultPoint::BeforeCall | FaultPoint::AfterCall => rng.u64(1..=200),
            FaultPoint::BeforeCommit | FaultPoint::AfterCommit => rng.u64(1..=600),
        };
        Some((point, n))
    }
}

/// How the harness reaches PostgreSQL for what the store contract does not do: `psql`, with the
/// base URL (no `schema=` or other query parameters, which psql does not take).
pub struct Postgres {
    pub base_url: String,
    pub schema: String,
    /// The application_name the workers connect with, to terminate only their connections.
    pub app_name: String,
    pub restart_command: String,
}

impl Postgres {
    fn psql(&self, sql: &str) -> anyhow::Result<String> {
        let out = Command::new("psql")
            .args([self.base_url.as_str(), "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .context("running psql")?;
        if !out.status.success() {
            bail!("psql: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Terminates the workers' connections; returns how many there were.
    pub fn terminate_connections(&self) -> anyhow::Result<u64> {
        let n = self.psql(&format!(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{}'",
            self.app_name
        ))?;
        Ok(n.parse().unwrap_or(0))
    }

    /// The instance that holds the supervisors' leader lease now, and its term.
    pub fn leader(&self) -> anyhow::Result<Option<(String, i64)>> {
        let out = self.psql(&format!("SELECT holder || ' ' || term FROM {}.leaders LIMIT 1", self.schema))?;
        Ok(out.split_once(' ').and_then(|(h, t)| Some((h.to_owned(), t.parse().ok()?))))
    }

    /// Restarts the server and waits until it answers again.
    pub fn restart(&self) -> anyhow::Result<Duration> {
        let started = std::time::Instant::now();
        let status =
            Command::new("sh").args(["-c", &self.restart_command]).status().context("restarting PostgreSQL")?;
        if !status.success() {
            bail!("`{}` failed ({status})", self.restart_command);
        }
        for _ in 0..120 {
            if self.psql("SELECT 1").is_ok() {
                return Ok(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        bail!("PostgreSQL did not come back within 30 s of `{}`", self.restart_command)
    }

    pub fn drop_schema(&self) -> anyhow::Result<()> {
        self.psql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema)).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_menu_offers_postgres_faults_only_on_postgres() {
        let sqlite = Menu { postgres: false, restart_postgres: false, failover: false, workers: 1 };
        let pg = Menu { postgres: true, restart_postgres: true, failover: true, workers: 3 };
        let mut rng = fastrand::Rng::with_seed(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            let f = sqlite.pick(&mut rng);
            assert!(matches!(f, Fault::Kill | Fault::Pause), "{f:?} on SQLite");
            seen.insert(pg.pick(&mut rng));
        }
        assert_eq!(seen.len(), 6, "every fault is picked on PostgreSQL: {seen:?}");
    }
}
