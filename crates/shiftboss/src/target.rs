//! Which state store a command talks to: `--db` as a plain path or `sqlite:PATH` (the embedded
//! default), or a `postgres://` URL (the distributed mode).

use anyhow::{Context, bail};
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::Store;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

pub const DEFAULT_DB: &str = "./shiftboss.db";

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
    pub async fn open(&self, create: bool) -> anyhow::Result<Arc<dyn Store>> {
        match self {
            DbTarget::Sqlite(path) => {
                let opts = OpenOptions { create, ..OpenOptions::default() };
                let store = SqliteStore::open(path, &opts)
                    .with_context(|| format!("opening the state store {}", path.display()))?;
                Ok(Arc::new(store))
            }
            DbTarget::Postgres(url) => {
                let (url, schema) = split_schema(url)?;
                let opts = PgOptions { schema, run_migrations: create, ..PgOptions::default() };
                let store = PostgresStore::connect(&url, &opts)
                    .await
                    .with_context(|| format!("opening the state store {self}"))?;
                Ok(Arc::new(store))
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
