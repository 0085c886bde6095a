//! Which state store a command talks to: `--db` as a plain path or `sqlite:PATH` (the embedded
//! default), or a `postgres://` URL (the distributed mode).

use anyhow::{Context, bail};
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, StoreError};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub const DEFAULT_DB: &str = "./shiftboss.db";

/// How long a command waits on the state store: `--store-timeout`, `--store-connect` and
/// `--store-wait`, or the config file's `[store]` section. Set once by `main` for the whole process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreBounds {
    /// The longest one transaction may take (PostgreSQL: see `PgOptions::store_timeout`).
    pub timeout: Duration,
    /// The longest one host may take to accept a connection (PostgreSQL, per host of the URL).
    pub connect_timeout: Duration,
    /// How long a command rides out a store out of reach, trying again with backoff, before it
    /// gives up (`serve`'s roles retry for as long as they run).
    pub wait: Duration,
}

impl Default for StoreBounds {
    fn default() -> Self {
        let pg = PgOptions::default();
        StoreBounds { timeout: pg.store_timeout, connect_timeout: pg.connect_timeout, wait: Duration::from_secs(30) }
    }
}

static BOUNDS: OnceLock<StoreBounds> = OnceLock::new();

/// Sets the process's store bounds; the first call wins (`main` makes it, before any store opens).
pub fn set_bounds(b: StoreBounds) {
    let _ = BOUNDS.set(b);
}

/// The process's store bounds: those `main` set, or the defaults.
pub fn bounds() -> StoreBounds {
    BOUNDS.get().copied().unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbTarget {
    Sqlite(PathBuf),
    Postgres(String),
}

impl DbTarget {
    pub fn parse(s: &str) -> anyhow::Result<DbTarget> {
        let s = s.trim();
        if s.is_empty() {
            bail!("--db is empty: give a file path, sqlite:PATH or postgres://...");
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(DbTarget::Postgres(s.to_owned()));
        }
        if let Some(path) = s.strip_prefix("sqlite://").or_else(|| s.strip_prefix("sqlite:")) {
            if path.is_empty() {
                bail!("--db {s:?} names no file");
            }
            return Ok(DbTarget::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            bail!("--db {s:?}: unknown scheme {scheme:?} (use a file path, sqlite:PATH or postgres://...)");
        }
        Ok(DbTarget::Sqlite(PathBuf::from(s)))
    }

    /// The target as given, password included: for child processes' environment, never for display.
    pub fn raw(&self) -> String {
        match self {
            DbTarget::Sqlite(p) => format!("sqlite:{}", p.display()),
            DbTarget::Postgres(url) => url.clone(),
        }
    }

    /// Opens the store. Commands that only look at or act on existing tasks pass `create: false`,
    /// so that a mistyped path is an error rather than a new empty database.
    ///
    /// A store out of reach (a PostgreSQL failing over) is tried again with backoff for up to the
    /// process's `--store-wait`, saying once on standard error what it waits for.
    pub async fn open(&self, create: bool) -> anyhow::Result<Arc<dyn Store>> {
        let wait = crate::patient::Waiter::new(bounds().wait);
        let what = format!("opening the state store {self}");
        wait.retry(&what, || self.open_once(create)).await.context(what)
    }

    async fn open_once(&self, create: bool) -> Result<Arc<dyn Store>, StoreError> {
        match self {
            DbTarget::Sqlite(path) => {
                let opts = OpenOptions { create, ..OpenOptions::default() };
                Ok(Arc::new(SqliteStore::open(path, &opts)?))
            }
            DbTarget::Postgres(url) => {
                let (url, schema) = split_schema(url).map_err(|e| StoreError::InvalidInput(format!("{e:#}")))?;
                let b = bounds();
                let opts = PgOptions {
                    schema,
                    run_migrations: create,
                    store_timeout: b.timeout,
                    connect_timeout: b.connect_timeout,
                    ..PgOptions::default()
                };
                Ok(Arc::new(PostgresStore::connect(&url, &opts).await?))
            }
        }
    }
}

/// The store's schema comes from a `schema=` parameter of the URL (default `shiftboss`); the rest
/// of the URL goes to the driver, which does not know that parameter.
pub fn split_schema(url: &str) -> anyhow::Result<(String, String)> {
    let default = PgOptions::default().schema;
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), default)) };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix("schema=") {
            Some(v) => {
                schema = Some(v.to_owned());
                false
            }
            None => !kv.is_empty(),
        })
        .collect();
    let url = if rest.is_empty() { base.to_owned() } else { format!("{base}?{}", rest.join("&")) };
    match schema {
        Some(s) if s.is_empty() => bail!("the database URL's schema= is empty"),
        Some(s) => Ok((url, s)),
        None => Ok((url, default)),
    }
}

impl fmt::Display for DbTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbTarget::Sqlite(p) => write!(f, "{}", p.display()),
            // Never print a password.
            DbTarget::Postgres(url) => match url.split_once('@') {
                Some((creds, host)) if creds.contains(':') && creds.matches(':').count() > 1 => {
                    let user = creds.rsplit_once(':').map_or(creds, |(u, _)| u);
                    write!(f, "{user}:***@{host}")
                }
                _ => f.write_str(url),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_targets_parse() {
        assert_eq!(DbTarget::parse("x.db").unwrap(), DbTarget::Sqlite("x.db".into()));
        assert_eq!(DbTarget::parse("sqlite:/tmp/x.db").unwrap(), DbTarget::Sqlite("/tmp/x.db".into()));
        assert_eq!(DbTarget::parse("sqlite:///tmp/x.db").unwrap(), DbTarget::Sqlite("/tmp/x.db".into()));
        let pg = "postgres://postgres@127.0.0.1:5432/test";
        assert_eq!(DbTarget::parse(pg).unwrap(), DbTarget::Postgres(pg.into()));
        assert!(DbTarget::parse("mysql://h/db").is_err());
        assert!(DbTarget::parse("sqlite:").is_err());
        assert!(DbTarget::parse("  ").is_err());
    }

    #[test]
    fn the_schema_comes_from_the_url() {
        let (url, schema) = split_schema("postgres://h/db?schema=orders&application_name=x").unwrap();
        assert_eq!((url.as_str(), schema.as_str()), ("postgres://h/db?application_name=x", "orders"));
        let (url, schema) = split_schema("postgres://h/db").unwrap();
        assert_eq!((url.as_str(), schema.as_str()), ("postgres://h/db", "shiftboss"));
        let (url, _) = split_schema("postgres://h/db?schema=a").unwrap();
        assert_eq!(url, "postgres://h/db");
        assert!(split_schema("postgres://h/db?schema=").is_err());
    }

    #[test]
    fn passwords_are_not_shown() {
        let t = DbTarget::parse("postgres://app:s3cret@db:5432/x").unwrap();
        assert_eq!(t.to_string(), "postgres://app:***@db:5432/x");
        assert!(!t.to_string().contains("s3cret"));
    }
}
