//! The store's schema: refuse one that is foreign or newer than this build before changing anything,
//! then apply the migrations this build knows.
//!
//! The version table (`schema_version`, one row per applied migration) lives in the store's schema.
//! Migrations run in one transaction that first takes a transaction-level advisory lock keyed by
//! the schema's name: processes starting at once against a fresh schema queue on it, and each
//! after the first finds the work done. A failed migration rolls back whole.

use crate::error::map_err;
use crate::rows::get;
use shiftboss_store::StoreError;
use tokio_postgres::Client;

/// Every migration, in order: (version, file name, SQL). The schema version is the last one applied.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "0001_initial", include_str!("migrations/0001_initial.sql")),
    (2, "0002_buckets", include_str!("migrations/0002_buckets.sql")),
    (3, "0003_workflows", include_str!("migrations/0003_workflows.sql")),
    (4, "0004_history", include_str!("migrations/0004_history.sql")),
    (5, "0005_rare_events", include_str!("migrations/0005_rare_events.sql")),
    (6, "0006_next_due", include_str!("migrations/0006_next_due.sql")),
    (7, "0007_lean_step_indexes", include_str!("migrations/0007_lean_step_indexes.sql")),
    (8, "0008_api_tokens", include_str!("migrations/0008_api_tokens.sql")),
    (9, "0009_task_filters", include_str!("migrations/0009_task_filters.sql")),
    (10, "0010_agent_workers", include_str!("migrations/0010_agent_workers.sql")),
    (11, "0011_webhooks", include_str!("migrations/0011_webhooks.sql")),
    (12, "0012_event_stream", include_str!("migrations/0012_event_stream.sql")),
    (13, "0013_task_generation", include_str!("migrations/0013_task_generation.sql")),
    (14, "0014_cursors", include_str!("migrations/0014_cursors.sql")),
    (15, "0015_outbox_lookups", include_str!("migrations/0015_outbox_lookups.sql")),
    (16, "0016_id_epochs", include_str!("migrations/0016_id_epochs.sql")),
    (17, "0017_more_step_kinds", include_str!("migrations/0017_more_step_kinds.sql")),
    (18, "0018_deadlines_and_domains", include_str!("migrations/0018_deadlines_and_domains.sql")),
    (19, "0019_progress_and_documents", include_str!("migrations/0019_progress_and_documents.sql")),
    (20, "0020_queue_stats", include_str!("migrations/0020_queue_stats.sql")),
];

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The advisory lock's first key: "SBOS", as the SQLite store's application id. The second is a
/// hash of the schema's name, so that stores in other schemas migrate without waiting on this one.
const LOCK_CLASS: i32 = 0x5342_4f53;

/// What a schema holds, read without changing anything.
enum Found {
    NoSchema,
    /// The schema exists without a version table; `objects` is how many relations it holds.
    Unversioned {
        objects: i64,
    },
    Version(i32),
}

async fn inspect(c: &Client, schema: &str) -> Result<Found, StoreError> {
    let row = c
        .query_one(
            "SELECT n.oid IS NOT NULL,
                    to_regclass(format('%I.schema_version', $1::text)) IS NOT NULL,
                    (SELECT count(*) FROM pg_class WHERE relnamespace = n.oid)
               FROM (SELECT $1::text AS name) want LEFT JOIN pg_namespace n ON n.nspname = want.name",
            &[&schema],
        )
        .await
        .map_err(map_err)?;
    let (exists, versioned, objects): (bool, bool, i64) = (get(&row, 0)?, get(&row, 1)?, get(&row, 2)?);
    if !exists {
        return Ok(Found::NoSchema);
    }
    if !versioned {
        return Ok(Found::Unversioned { objects });
    }
    let row = c
        .query_one(&format!("SELECT coalesce(max(version), 0) FROM {}.schema_version", ident(schema)), &[])
        .await
        .map_err(map_err)?;
    Ok(Found::Version(get(&row, 0)?))
}

/// Checks that the schema is at this build's version, changing nothing (for a store connected
/// with migrations off).
pub async fn check(c: &Client, schema: &str) -> Result<(), StoreError> {
    match inspect(c, schema).await? {
        Found::Version(v) if v == SCHEMA_VERSION => Ok(()),
        Found::Version(v) if v > SCHEMA_VERSION => Err(newer(schema, v)),
        Found::Version(v) => Err(StoreError::Incompatible(format!(
            "schema {schema:?} is at version {v}; this build needs version {SCHEMA_VERSION}: run the migrations \
             (`shiftboss migrate`, or connect with migrations on)"
        ))),
        Found::NoSchema => Err(StoreError::Incompatible(format!(
            "schema {schema:?} does not exist in this database: create it with the migrations (`shiftboss migrate`, \
             or connect with migrations on), or check the schema name"
        ))),
        Found::Unversioned { .. } => Err(not_ours(schema)),
    }
}

/// Applies the migrations this build knows, in one transaction under the schema's advisory lock.
/// Returns how many were applied.
pub async fn migrate(c: &mut Client, schema: &str) -> Result<usize, StoreError> {
    let tx = c.transaction().await.map_err(map_err)?;
    // Migrations may wait on another process's (the lock) and rewrite large tables: the store's
    // statement timeout is for its calls, not for these.
    tx.batch_execute("SET LOCAL statement_timeout = 0").await.map_err(map_err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&LOCK_CLASS, &schema]).await.map_err(map_err)?;
    // Read after the lock: another process may have migrated while this one waited.
    let from = match inspect(tx.client(), schema).await? {
        Found::Version(v) if v > SCHEMA_VERSION => return Err(newer(schema, v)),
        Found::Version(v) => v,
        Found::NoSchema => 0,
        Found::Unversioned { objects: 0 } => 0,
        Found::Unversioned { .. } => return Err(not_ours(schema)),
    };
    if from == SCHEMA_VERSION {
        return Ok(0);
    }
    let schema_ident = ident(schema);
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema_ident};
         SET LOCAL search_path TO {schema_ident};
         CREATE TABLE IF NOT EXISTS schema_version (
             version    INTEGER PRIMARY KEY,
             name       TEXT    NOT NULL,
             applied_at BIGINT  NOT NULL DEFAULT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
         );"
    ))
    .await
    .map_err(map_err)?;
    let mut applied = 0;
    for (version, name, sql) in MIGRATIONS.iter().filter(|(v, _, _)| *v > from) {
        tx.batch_execute(sql).await.map_err(|e| migration_failed(name, e))?;
        tx.execute("INSERT INTO schema_version (version, name) VALUES ($1, $2)", &[version, name])
            .await
            .map_err(map_err)?;
        applied += 1;
    }
    tx.commit().await.map_err(map_err)?;
    Ok(applied)
}

fn newer(schema: &str, version: i32) -> StoreError {
    StoreError::Incompatible(format!(
        "schema {schema:?} was written by a newer shiftboss (schema version {version}; this build knows up to \
         {SCHEMA_VERSION}); upgrade shiftboss to use it"
    ))
}

fn not_ours(schema: &str) -> StoreError {
    StoreError::Incompatible(format!(
        "schema {schema:?} holds tables but no shiftboss schema_version table: it is not a shiftboss state store; \
         refusing to touch it (use a schema of its own for shiftboss)"
    ))
}

fn migration_failed(name: &str, e: tokio_postgres::Error) -> StoreError {
    match map_err(e) {
        StoreError::Unavailable(m) => StoreError::Unavailable(format!("migration {name}: {m}")),
        other => StoreError::Backend(format!("migration {name} failed: {other}")),
    }
}

/// Whether `name` can be a schema of ours: a plain lower-case identifier, so that it needs no
/// quoting in SQL or in the connection's `-c search_path=` option.
pub fn check_schema_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.starts_with("pg_");
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidInput(format!(
            "schema name {name:?}: use 1 to 63 lower-case letters, digits and underscores, starting with a letter \
             or underscore, and not pg_"
        )))
    }
}

/// A checked schema name as an SQL identifier (quoted anyway, so that a reserved word still works).
pub fn ident(schema: &str) -> String {
    format!("\"{schema}\"")
}
