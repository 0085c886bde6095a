//! What every PostgreSQL test needs: the database URL (or a loud skip), and a fresh schema of its
//! own that is dropped when the test ends, so that runs never see each other's rows.
#![allow(dead_code)] // each test file uses its own part of this module

use shiftboss_postgres::{PgOptions, PostgresStore};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_postgres::{Client, NoTls};

/// The environment variable that names the test database.
pub const URL_VAR: &str = "SHIFTBOSS_TEST_PG";

/// Test schemas older than this are left over from killed runs, and dropped.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// The test database's URL, or None when this test should be skipped.
///
/// The one rule for every PostgreSQL test: under CI (`CI` set, not "false"/"0") a missing URL
/// fails the test; outside CI it prints a loud skip message and the test returns. A URL that is set
/// but unreachable fails the test everywhere (see [`admin`]): someone asked for PostgreSQL.
pub fn test_db() -> Option<String> {
    if let Ok(url) = std::env::var(URL_VAR)
        && !url.trim().is_empty()
    {
        return Some(url);
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    let test = std::thread::current().name().unwrap_or("a PostgreSQL test").to_owned();
    if ci {
        panic!("{URL_VAR} is not set under CI: the PostgreSQL tests must run there ({test})");
    }
    eprintln!(
        "\n\
         ************************************************************************\n\
         SKIPPED {test}: {URL_VAR} is not set, so the PostgreSQL store was NOT tested.\n\
         Run with {URL_VAR}=postgres://postgres@127.0.0.1:5432/test (under CI this fails).\n\
         ************************************************************************\n"
    );
    None
}

/// A connection of the test's own, outside any store, for setting up and checking schemas.
pub async fn admin(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("{URL_VAR}={url}: cannot reach the test database: {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A new schema name: `sbt_` then the creation time (8 hex digits of seconds) and 16 random hex
/// digits, so that a leftover schema's age can be read from its name.
pub fn fresh_schema_name() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as u32;
    // A v4 UUID's randomness comes from the operating system, not a per-process generator whose
    // seeds could meet when many test processes start in the same instant.
    format!("sbt_{secs:08x}{}", &uuid::Uuid::new_v4().simple().to_string()[..16])
}

/// A schema name that exists only for this test: dropped (with everything in it) on drop, even when
/// the test panics.
pub struct TestSchema {
    pub url: String,
    pub name: String,
}

impl TestSchema {
    /// A fresh name; nothing is created yet. Drops stale schemas of killed runs first.
    pub async fn new(url: &str) -> TestSchema {
        drop_stale_schemas(&admin(url).await).await;
        TestSchema { url: url.to_owned(), name: fresh_schema_name() }
    }

    pub fn options(&self, run_migrations: bool) -> PgOptions {
        PgOptions { schema: self.name.clone(), pool_size: 4, run_migrations, ..PgOptions::default() }
    }

    /// Creates and migrates the schema, as the first process against a database would.
    pub async fn migrated(url: &str) -> TestSchema {
        let s = TestSchema::new(url).await;
        let store = PostgresStore::connect(url, &s.options(true))
            .await
            .unwrap_or_else(|e| panic!("migrate test schema {}: {e}", s.name));
        drop(store);
        s
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, where blocking on another future is not allowed: a
        // thread of its own with a runtime of its own does the cleanup, and the test waits for it.
        let (url, name) = (self.url.clone(), self.name.clone());
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("cleanup runtime");
            rt.block_on(async {
                let c = admin(&url).await;
                c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).await
            })
        })
        .join();
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: could not drop test schema {}: {e}", self.name),
            Err(_) => eprintln!("warning: could not drop test schema {}: cleanup thread panicked", self.name),
        }
    }
}

/// Best effort: drops `sbt_` schemas older than [`STALE_AFTER`], left by runs that were killed
/// before their schemas' drops ran. One process at a time does it (a try-lock), the others skip.
async fn drop_stale_schemas(c: &Client) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    // A session lock, not a transaction's: each schema is dropped in a transaction of its own, so
    // that dropping many never holds all their locks at once. The connection's end releases it.
    let result = async {
        let locked: bool =
            c.query_one("SELECT pg_try_advisory_lock(hashtext('shiftboss test schema cleanup'))", &[]).await?.get(0);
        if !locked {
            return Ok(());
        }
        let rows = c.query(r"SELECT nspname FROM pg_namespace WHERE nspname ~ '^sbt_[0-9a-f]{16}$'", &[]).await?;
        for row in rows {
            let name: String = row.get(0);
            let created = u64::from_str_radix(&name[4..12], 16).unwrap_or(u64::MAX);
            if now.saturating_sub(created) > STALE_AFTER.as_secs() {
                c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).await?;
            }
        }
        c.query_one("SELECT pg_advisory_unlock(hashtext('shiftboss test schema cleanup'))", &[]).await.map(drop)
    }
    .await;
    if let Err(e) = result {
        eprintln!("warning: dropping stale test schemas: {e}");
    }
}
