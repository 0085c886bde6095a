//! The fake services' ledger: every effect they applied, by service and idempotency key, in a
//! SQLite file of its own. It answers "was this order's charge applied twice?" for the orders of
//! one state store, so it belongs to that store: orders are numbered from 1 under stable keys
//! (`order-000001`...), and a ledger shared by two stores (a demo on SQLite, then one on
//! PostgreSQL, in one directory) would count each store's effects as the other's repeats.
//!
//! Where it lives: beside a SQLite store, named after its file (`shiftboss.db` ->
//! `shiftboss.services.db`); for PostgreSQL, in the working directory, named after the server,
//! the database and the schema (`shiftboss.services.127_0_0_1-5432.test.shiftboss.db`).

use crate::target::{DbTarget, split_schema};
use anyhow::Context;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The ledger's file name for the store `db` (no directory).
pub fn file_name(db: &DbTarget) -> anyhow::Result<String> {
    match db {
        DbTarget::Sqlite(path) => {
            let stem = path.file_stem().with_context(|| format!("--db {} names no file", path.display()))?;
            Ok(format!("{}.services.db", stem.to_string_lossy()))
        }
        DbTarget::Postgres(url) => {
            let (url, schema) = split_schema(url)?;
            let config: tokio_postgres::Config =
                url.parse().with_context(|| format!("reading the database URL {db} for the demo's ledger"))?;
            let host = match config.get_hosts().first() {
                Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
                Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
                None => "localhost".to_owned(),
            };
            let port = config.get_ports().first().copied().unwrap_or(5432);
            // The server's default database is the user's name.
            let database = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
            Ok(format!(
                "shiftboss.services.{}-{port}.{}.{}.db",
                file_safe(&host),
                file_safe(database),
                file_safe(&schema)
            ))
        }
    }
}

/// Where the demo keeps the ledger for the store `db`: beside a SQLite file, in the working
/// directory for PostgreSQL.
pub fn path_for(db: &DbTarget) -> anyhow::Result<PathBuf> {
    let name = file_name(db)?;
    Ok(match db {
        DbTarget::Sqlite(path) => path.with_file_name(name),
        DbTarget::Postgres(_) => PathBuf::from(name),
    })
}

/// Letters, digits, `-` and `_` as they are; anything else (a dot, a slash, a space) as `_`.
fn file_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// The three services' shared ledger of effects, for one state store.
pub struct Ledger {
    conn: Mutex<Connection>,
}

impl Ledger {
    pub fn open(path: &Path) -> anyhow::Result<Ledger> {
        let conn =
            Connection::open(path).with_context(|| format!("opening the demo services' ledger {}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS effects_by_action (
                 service TEXT NOT NULL, action TEXT NOT NULL, idempotency_key TEXT NOT NULL,
                 order_id TEXT NOT NULL, response TEXT NOT NULL, applied_at INTEGER NOT NULL,
                 PRIMARY KEY (service, idempotency_key));
             CREATE TABLE IF NOT EXISTS duplicates (service TEXT PRIMARY KEY, dropped INTEGER NOT NULL);",
        )
        .with_context(|| format!("{} is not a demo ledger", path.display()))?;
        Ok(Ledger { conn: Mutex::new(conn) })
    }

    /// Forgets every effect: for a store that starts over (`--fresh`, or one that holds no task
    /// yet), whose orders reuse the keys of effects recorded for the tasks it no longer has.
    pub fn start_over(&self) -> anyhow::Result<()> {
        self.lock()
            .execute_batch("DELETE FROM effects_by_action; DELETE FROM duplicates;")
            .context("emptying the demo services' ledger")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answer given before for this key, if any; counts the duplicate request.
    pub(super) fn replay(&self, service: &str, key: &str) -> rusqlite::Result<Option<String>> {
        let c = self.lock();
        let prior: Option<String> = c
            .query_row(
                "SELECT response FROM effects_by_action WHERE service = ?1 AND idempotency_key = ?2",
                [service, key],
                |r| r.get(0),
            )
            .optional()?;
        if prior.is_some() {
            c.execute(
                "INSERT INTO duplicates (service, dropped) VALUES (?1, 1)
                 ON CONFLICT (service) DO UPDATE SET dropped = dropped + 1",
                [service],
            )?;
        }
        Ok(prior)
    }

    /// Applies an effect once per key; returns the answer to give (the first one, if it raced).
    pub(super) fn apply(
        &self,
        service: &str,
        action: &str,
        key: &str,
        order_id: &str,
        response: &str,
    ) -> rusqlite::Result<String> {
        let c = self.lock();
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        c.execute(
            "INSERT OR IGNORE INTO effects_by_action (service, action, idempotency_key, order_id, response, applied_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![service, action, key, order_id, response, now],
        )?;
        c.query_row(
            "SELECT response FROM effects_by_action WHERE service = ?1 AND idempotency_key = ?2",
            [service, key],
            |r| r.get(0),
        )
    }

    /// Orders whose effect a service applied more than once (under different keys), by service
    /// and action (`payment/refund`).
    pub fn applied_twice(&self) -> rusqlite::Result<Vec<(String, u64)>> {
        let c = self.lock();
        let mut st = c.prepare(
            "SELECT service || '/' || action, count(*) FROM (
                 SELECT service, action, order_id FROM effects_by_action
                 GROUP BY service, action, order_id HAVING count(*) > 1)
             GROUP BY service, action",
        )?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
        rows.collect()
    }

    /// Effects applied of one action (`refund`), counted once per order.
    pub fn orders_with(&self, action: &str) -> rusqlite::Result<u64> {
        self.lock()
            .query_row("SELECT count(DISTINCT order_id) FROM effects_by_action WHERE action = ?1", [action], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as u64)
    }

    /// Repeated requests each service dropped because it had seen their key.
    pub fn duplicates_dropped(&self) -> rusqlite::Result<u64> {
        self.lock()
            .query_row("SELECT coalesce(sum(dropped), 0) FROM duplicates", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(db: &str) -> String {
        file_name(&DbTarget::parse(db).unwrap()).unwrap()
    }

    #[test]
    fn each_store_has_a_ledger_of_its_own() {
        assert_eq!(name("shiftboss.db"), "shiftboss.services.db");
        assert_eq!(
            path_for(&DbTarget::parse("/tmp/a/orders.db").unwrap()).unwrap(),
            Path::new("/tmp/a/orders.services.db")
        );
        let pg = "postgres://postgres@127.0.0.1:5432/test";
        assert_eq!(name(pg), "shiftboss.services.127_0_0_1-5432.test.shiftboss.db");
        assert_eq!(name(&format!("{pg}?schema=x")), "shiftboss.services.127_0_0_1-5432.test.x.db");
        assert_ne!(name(&format!("{pg}?schema=x")), name(&format!("{pg}?schema=y")));
        assert_ne!(name(pg), name("postgres://postgres@127.0.0.1:5432/other"));
        // Another server with the same database and schema names is another store.
        assert_ne!(name(pg), name("postgres://postgres@10.0.0.2:5432/test"));
        // The user's name is the default database; the application name changes nothing.
        assert_eq!(name("postgres://app@db"), "shiftboss.services.db-5432.app.shiftboss.db");
        assert_eq!(name(&format!("{pg}?schema=x&application_name=w1")), name(&format!("{pg}?schema=x")));
        // None of a URL's punctuation reaches the file system.
        assert_eq!(name("postgres://u@h/d?schema=../a%20b"), "shiftboss.services.h-5432.d.___a_20b.db");
        // Not the SQLite default's ledger: the two demos of issue 25 no longer share one.
        assert_ne!(name(pg), name("shiftboss.db"));
    }

    #[test]
    fn starting_over_forgets_every_effect() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("l.services.db")).unwrap();
        ledger.apply("payment", "charge", "k1", "order-1", "{}").unwrap();
        ledger.apply("payment", "charge", "k2", "order-1", "{}").unwrap();
        assert!(ledger.replay("payment", "k1").unwrap().is_some());
        assert_eq!(ledger.applied_twice().unwrap(), vec![("payment/charge".to_owned(), 1)]);
        assert_eq!(ledger.duplicates_dropped().unwrap(), 1);
        ledger.start_over().unwrap();
        assert!(ledger.applied_twice().unwrap().is_empty());
        assert_eq!(ledger.duplicates_dropped().unwrap(), 0);
        assert!(ledger.replay("payment", "k1").unwrap().is_none());
    }
}
