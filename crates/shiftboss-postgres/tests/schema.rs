//! What only a schema-backed store has to get right: refusing a schema that is newer or foreign
//! without touching it, a clear error for a schema that is not there, concurrent first starts, and
//! errors that say whether to retry.

mod common;

use common::{TestSchema, admin, test_db};
use shiftboss_postgres::{PgOptions, PostgresStore, SCHEMA_VERSION};
use shiftboss_store::{Store, StoreError};
use tokio_postgres::Client;

fn connect_err(r: Result<PostgresStore, StoreError>) -> StoreError {
    match r {
        Ok(s) => panic!("connected to {}", s.schema()),
        Err(e) => e,
    }
}

/// Everything observable about a schema: its relations, their columns, and its version rows.
async fn describe(c: &Client, schema: &str) -> Vec<String> {
    let mut out = Vec::new();
    let rel = "SELECT c.relname || ':' || c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = $1 ORDER BY 1";
    for row in c.query(rel, &[&schema]).await.unwrap() {
        out.push(row.get(0));
    }
    let cols = "SELECT table_name || '.' || column_name || ' ' || data_type FROM information_schema.columns
                WHERE table_schema = $1 ORDER BY 1";
    for row in c.query(cols, &[&schema]).await.unwrap() {
        out.push(row.get(0));
    }
    if let Ok(rows) = c.query(&format!("SELECT version, name FROM \"{schema}\".schema_version ORDER BY 1"), &[]).await {
        for row in rows {
            out.push(format!("version {} {}", row.get::<_, i32>(0), row.get::<_, String>(1)));
        }
    }
    out
}

async fn schema_exists(c: &Client, schema: &str) -> bool {
    c.query_one("SELECT count(*) FROM pg_namespace WHERE nspname = $1", &[&schema]).await.unwrap().get::<_, i64>(0) == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_from_a_newer_shiftboss_is_refused_and_left_unchanged() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let c = admin(&url).await;
    c.execute(
        &format!("INSERT INTO \"{}\".schema_version (version, name) VALUES ($1, 'from_the_future')", s.name),
        &[&(SCHEMA_VERSION + 1)],
    )
    .await
    .unwrap();
    let before = describe(&c, &s.name).await;

    for run_migrations in [true, false] {
        let e = connect_err(PostgresStore::connect(&url, &s.options(run_migrations)).await);
        assert!(matches!(&e, StoreError::Incompatible(m) if m.contains("newer")), "migrations {run_migrations}: {e:?}");
    }
    assert_eq!(describe(&c, &s.name).await, before, "not migrated, not written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_schema_without_migrations_is_a_clear_error_and_not_created() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::new(&url).await;
    let e = connect_err(PostgresStore::connect(&url, &s.options(false)).await);
    match &e {
        StoreError::Incompatible(m) => {
            assert!(m.contains(&s.name) && m.contains("does not exist") && m.contains("migrat"), "{m}")
        }
        other => panic!("want Incompatible, got {other:?}"),
    }
    assert!(!schema_exists(&admin(&url).await, &s.name).await, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_schema_without_migrations_is_refused() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let c = admin(&url).await;
    c.execute(&format!("DELETE FROM \"{}\".schema_version WHERE version = $1", s.name), &[&SCHEMA_VERSION])
        .await
        .unwrap();
    let e = connect_err(PostgresStore::connect(&url, &s.options(false)).await);
    assert!(matches!(&e, StoreError::Incompatible(m) if m.contains("migrat")), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_schema_is_refused_and_left_unchanged() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::new(&url).await;
    let c = admin(&url).await;
    c.batch_execute(&format!(
        "CREATE SCHEMA \"{0}\"; CREATE TABLE \"{0}\".customers (id INTEGER PRIMARY KEY, name TEXT);
         INSERT INTO \"{0}\".customers VALUES (1, 'Ada');",
        s.name
    ))
    .await
    .unwrap();
    let before = describe(&c, &s.name).await;
    for run_migrations in [true, false] {
        let e = connect_err(PostgresStore::connect(&url, &s.options(run_migrations)).await);
        assert!(matches!(&e, StoreError::Incompatible(m) if m.contains("not a shiftboss")), "{e:?}");
    }
    assert_eq!(describe(&c, &s.name).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_at_once_on_a_fresh_schema_all_connect_and_migrate_once() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::new(&url).await;
    // More than two, so that a missing lock shows up as a duplicate-schema or duplicate-table error.
    let connects: Vec<_> = (0..4)
        .map(|_| {
            let (url, opts) = (url.clone(), s.options(true));
            tokio::spawn(async move { PostgresStore::connect(&url, &opts).await })
        })
        .collect();
    let mut stores = Vec::new();
    for c in connects {
        stores.push(c.await.unwrap().unwrap_or_else(|e| panic!("a concurrent connect failed: {e}")));
    }
    let c = admin(&url).await;
    let versions: Vec<i32> = c
        .query(&format!("SELECT version FROM \"{}\".schema_version ORDER BY 1", s.name), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>(), "each migration applied once");
    for store in &stores {
        assert_eq!(store.task_counts().await.unwrap(), vec![], "every handle works");
    }
    assert_eq!(stores[0].migrate().await.unwrap(), 0, "nothing left to apply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_unavailable() {
    // Needs no database: nothing listens on port 1.
    let opts = PgOptions { connect_timeout: std::time::Duration::from_secs(5), ..PgOptions::default() };
    let e = connect_err(PostgresStore::connect("postgres://postgres@127.0.0.1:1/test", &opts).await);
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    assert!(e.is_transient());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_and_schema_names_are_invalid_input() {
    for (url, schema) in [
        ("postgres://postgres@127.0.0.1:5432/test", "Has-Caps"),
        ("postgres://postgres@127.0.0.1:5432/test", "x; DROP TABLE y"),
        ("postgres://postgres@127.0.0.1:5432/test", "pg_catalog"),
        ("postgres://postgres@127.0.0.1:5432/test", ""),
        ("not a url at all ::: ///", "shiftboss"),
    ] {
        let opts = PgOptions { schema: schema.into(), ..PgOptions::default() };
        let e = connect_err(PostgresStore::connect(url, &opts).await);
        assert!(matches!(e, StoreError::InvalidInput(_)), "{url} {schema:?}: {e:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_table_is_incompatible_not_a_retry() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&url, &s.options(false)).await.unwrap();
    admin(&url).await.batch_execute(&format!("DROP TABLE \"{}\".events", s.name)).await.unwrap();
    let e = store.summarize().await.unwrap_err();
    assert!(matches!(e, StoreError::Incompatible(_)), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_clock_is_the_servers() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&url, &s.options(false)).await.unwrap();
    let server: i64 = admin(&url)
        .await
        .query_one("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint", &[])
        .await
        .unwrap()
        .get(0);
    let now = store.now().await.unwrap();
    assert!((0..5_000).contains(&(now.0 - server)), "store {now:?} vs server {server}");
}
