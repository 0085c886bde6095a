//! Where a chaos run keeps its state: a new SQLite file, or a schema of its own on PostgreSQL with
//! an application name that lets the harness terminate only its workers' connections; with
//! `--failover`, that schema on a primary and standby of the harness's own.

use super::ChaosArgs;
use super::faults::Postgres;
use super::replicas::Replicas;
use anyhow::bail;
use shiftboss::target::DbTarget;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Where the run keeps its state, and what it must clean up after a pass.
pub struct Setup {
    /// What the harness itself opens (PostgreSQL: the schema, without the workers' application name).
    pub target: DbTarget,
    /// What the workers get as SHIFTBOSS_DB.
    pub worker_db: String,
    pub pg: Option<Arc<Postgres>>,
    /// The harness made the schema, so it drops it after a pass.
    pub created_schema: bool,
    /// `--failover`: the clusters the store lives on (removed when dropped).
    pub replicas: Option<Arc<Mutex<Replicas>>>,
}

pub fn setup(db_flag: Option<&str>, workdir: &Path, args: &ChaosArgs, seed: u64) -> anyhow::Result<Setup> {
    let mut replicas = None;
    let target = match (db_flag, args.failover) {
        (Some(_), true) => bail!("--failover runs a PostgreSQL primary and standby of its own: leave out --db"),
        (None, true) => {
            let schema = format!("chaos_{}_{}", std::process::id(), seed % 1_000_000);
            let r = Replicas::start(workdir, &schema)?;
            let url = format!("{}&schema={schema}", r.url());
            replicas = Some(Arc::new(Mutex::new(r)));
            DbTarget::Postgres(url)
        }
        (None, false) => DbTarget::Sqlite(workdir.join("chaos.db")),
        (Some(s), false) => DbTarget::parse(s)?,
    };
    match target {
        DbTarget::Sqlite(path) => {
            if path.exists() {
                bail!(
                    "{} exists: chaos needs a new store (it checks that every task it submitted is there)",
                    path.display()
                );
            }
            let worker_db = DbTarget::Sqlite(path.clone()).raw();
            Ok(Setup { target: DbTarget::Sqlite(path), worker_db, pg: None, created_schema: false, replicas })
        }
        DbTarget::Postgres(url) => {
            let (base, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
            let mut params: Vec<String> = query.split('&').filter(|p| !p.is_empty()).map(str::to_owned).collect();
            let given = params.iter().find_map(|p| p.strip_prefix("schema=").map(str::to_owned));
            let created_schema = given.is_none();
            let schema = given.unwrap_or_else(|| format!("chaos_{}_{}", std::process::id(), seed % 1_000_000));
            if created_schema {
                params.push(format!("schema={schema}"));
            }
            let app_name = format!("shiftboss_{schema}");
            let harness_url = format!("{base}?{}", params.join("&"));
            let worker_db = format!("{harness_url}&application_name={app_name}");
            // psql takes the URL's own parameters (a multi-host URL's target_session_attrs), not ours.
            let theirs: Vec<&str> = params.iter().map(String::as_str).filter(|p| !p.starts_with("schema=")).collect();
            let base_url = if theirs.is_empty() { base.to_owned() } else { format!("{base}?{}", theirs.join("&")) };
            let pg = Postgres { base_url, schema, app_name, restart_command: args.postgres_restart_command.clone() };
            Ok(Setup {
                target: DbTarget::Postgres(harness_url),
                worker_db,
                pg: Some(Arc::new(pg)),
                created_schema,
                replicas,
            })
        }
    }
}
