//! Opening a database file: refuse what is not ours or is newer than us before changing anything,
//! then switch to WAL and apply the migrations this version knows.

use crate::error::map_err;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use shiftboss_store::StoreError;
use std::path::Path;
use std::time::Duration;

/// Marks a file as a shiftboss state store ("SBOS"), so a foreign SQLite file is never written to.
pub const APPLICATION_ID: i32 = 0x5342_4f53;

/// Every migration, in order; the schema version is the number of migrations applied.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_initial.sql"),
    include_str!("migrations/0002_buckets.sql"),
    include_str!("migrations/0003_workflows.sql"),
    include_str!("migrations/0004_history.sql"),
    include_str!("migrations/0005_rare_events.sql"),
    include_str!("migrations/0006_next_due.sql"),
    include_str!("migrations/0007_checks_in_place.sql"),
    include_str!("migrations/0008_lean_step_indexes.sql"),
    include_str!("migrations/0009_task_indexes_in_place.sql"),
    include_str!("migrations/0010_one_processing_index.sql"),
    include_str!("migrations/0011_api_tokens.sql"),
    include_str!("migrations/0012_task_filters.sql"),
    include_str!("migrations/0013_agent_workers.sql"),
    include_str!("migrations/0014_webhooks.sql"),
    include_str!("migrations/0015_event_stream.sql"),
    include_str!("migrations/0016_task_generation.sql"),
    include_str!("migrations/0017_cursors.sql"),
    include_str!("migrations/0018_deadlines_and_domains.sql"),
    include_str!("migrations/0019_progress_and_documents.sql"),
    include_str!("migrations/0020_outbox_mute.sql"),
    include_str!("migrations/0021_queue_stats.sql"),
    include_str!("migrations/0022_outbox_from_the_store.sql"),
];

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// How hard commits are pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync on every commit: an acknowledged write survives a power cut.
    #[default]
    Full,
    /// WAL with synchronous=NORMAL: survives a crash of the process (kill -9), but the last commits
    /// may be lost if the machine loses power.
    Normal,
}

#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Create the file when it does not exist. Tools that only read should not.
    pub create: bool,
    pub durability: Durability,
    /// How long to wait for another process's write lock before reporting the store busy.
    pub busy_timeout: Duration,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { create: true, durability: Durability::Full, busy_timeout: Duration::from_secs(10) }
    }
}

/// The page size of a new file, in bytes.
pub const PAGE_SIZE: u32 = 16384;

/// Room for every statement the store prepares with `prepare_cached`.
const STATEMENT_CACHE: usize = 256;

/// The page cache's ceiling, in KiB.
const CACHE_KIB: u32 = 32 * 1024;

pub fn open_connection(path: &Path, opts: &OpenOptions) -> Result<Connection, StoreError> {
    if !opts.create && !path.exists() {
        return Err(StoreError::NotFound { what: "database file", id: path.display().to_string() });
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if opts.create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|e| describe_open(path, e))?;
    conn.busy_timeout(opts.busy_timeout).map_err(map_err)?;
    // The store's hot path alone (claim, replies, decider, sweep) prepares more statements than
    // rusqlite's default cache of 16 holds: evicted ones were parsed again on every use.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // With the planner's stability guarantee off, SQLite re-prepared some statements (the
    // decider's read of a task's steps) on nearly every run, about a tenth of a drain's time. Each
    // statement now keeps the plan it was prepared with; queries meant for a partial index name its
    // condition's values in their text.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(map_err)?;
    // rarray() lets the claim filter by a list of agents in one prepared statement.
    rusqlite::vtab::array::load_module(&conn).map_err(map_err)?;
    let found = check_identity(&conn, path)?;
    // Without `create`, an empty file (one that another process has just made, and not yet made a
    // store) is not a store: this open neither makes it one nor races that process to.
    if found == Found::Empty && !opts.create {
        return Err(StoreError::NotFound { what: "state store", id: path.display().to_string() });
    }
    if found == Found::Empty {
        // Before the first write, which fixes the page size of a file for good (in WAL mode even
        // VACUUM keeps it). 16 KiB pages drained one-step jobs about 12% faster than SQLite's
        // 4 KiB (interleaved runs; 8 KiB +5%, 32 and 64 KiB no better): a commit writes each dirty
        // page to the WAL with two calls, and a drain dirties runs of neighbouring rows. A file made
        // with other pages keeps them.
        conn.execute_batch(&format!("PRAGMA page_size = {PAGE_SIZE};")).map_err(map_err)?;
    }
    let mode: String =
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(|e| describe_open(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Incompatible(format!("{}: could not switch to WAL mode (got {mode})", path.display())));
    }
    let sync = match opts.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    // Foreign keys are checked from here on, but not while migrating: a migration may rebuild a
    // table that others reference (SQLite's way to change a constraint).
    conn.execute_batch(&format!("PRAGMA synchronous = {sync}; PRAGMA foreign_keys = OFF;")).map_err(map_err)?;
    // Statement journals in memory. A statement that may fail half way (a multi-row UPDATE or
    // INSERT on a table with CHECKs) and every savepoint of a group commit keep the pages they
    // change until they end; past 64 KiB SQLite spilled them to a temporary file, and a drain of
    // one-step jobs wrote about 5 KB per job there (two pwrite calls per page), for nothing that
    // survives the transaction. A journal holds at most the pages of one write: kilobytes.
    conn.execute_batch("PRAGMA temp_store = MEMORY;").map_err(map_err)?;
    // A page cache of up to 32 MiB (SQLite's default is 2 MiB, 125 pages of 16 KiB): with the
    // default, a drain read the pages of the step and event indexes back through the kernel again
    // and again (a read call and a copy each). Filled as pages are read, so an idle store stays
    // small. Three-step workflows drained 5-9% faster, one-step jobs the same (interleaved runs,
    // 2026-11-28; 128 MiB no better than 32, a memory map of the file worse).
    conn.execute_batch(&format!("PRAGMA cache_size = -{CACHE_KIB};")).map_err(map_err)?;
    if migrate(&conn, path)? {
        // A migration may rewrite stored schema text (0007), which a connection parsed when it
        // first read the schema: a new one parses the text as it now is.
        drop(conn);
        return open_connection(path, opts);
    }
    conn.execute_batch("PRAGMA foreign_keys = ON;").map_err(map_err)?;
    Ok(conn)
}

fn describe_open(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
            StoreError::Incompatible(format!("{}: not a SQLite database, or a damaged one", path.display()))
        }
        Some(rusqlite::ErrorCode::CannotOpen) => {
            StoreError::Unavailable(format!("{}: cannot open: {e}", path.display()))
        }
        _ => map_err(e),
    }
}

/// Refuses a file that belongs to something else, or that a newer shiftboss wrote; reads only.
fn check_identity(conn: &Connection, path: &Path) -> Result<Found, StoreError> {
    let read = |pragma: &str| -> Result<i32, StoreError> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0)).map_err(|e| describe_open(path, e))
    };
    // One read transaction for the three reads: a file that another process is making a store is
    // seen before or after its migration commits, never half-way. Read one by one, the migration
    // could commit between them, and its tables beside the application id read before it (0) were
    // refused as another program's file (seen in CI: a command opening the file a starting demo
    // had just created).
    conn.execute_batch("BEGIN DEFERRED").map_err(|e| describe_open(path, e))?;
    let seen = (|| -> Result<(i32, i32, i64), StoreError> {
        let objects: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| describe_open(path, e))?;
        Ok((read("application_id")?, read("user_version")?, objects))
    })();
    // A read transaction: ending it cannot lose anything, whichever way it ends.
    let _ = conn.execute_batch(if seen.is_ok() { "COMMIT" } else { "ROLLBACK" });
    let (app_id, version, objects) = seen?;
    let is_ours = app_id == APPLICATION_ID;
    let is_empty = app_id == 0 && version == 0 && objects == 0;
    if !is_ours && !is_empty {
        return Err(StoreError::Incompatible(format!(
            "{}: this SQLite file is not a shiftboss state store; refusing to touch it",
            path.display()
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(newer(path, version));
    }
    Ok(if is_ours { Found::Store } else { Found::Empty })
}

/// What `check_identity` found in a file it accepts.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// A shiftboss state store.
    Store,
    /// A new or empty file, to be made one.
    Empty,
}

fn newer(path: &Path, version: i32) -> StoreError {
    StoreError::Incompatible(format!(
        "{}: written by a newer shiftboss (schema version {version}; this build knows up to {SCHEMA_VERSION}); \
         upgrade shiftboss to use it",
        path.display()
    ))
}

/// Applies the migrations the file lacks; true when it applied any.
fn migrate(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
    // IMMEDIATE takes the write lock first, so two processes opening a new file do not both migrate.
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).map_err(map_err)?;
    let version: i32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(map_err)?;
    if version > SCHEMA_VERSION {
        return Err(newer(path, version));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql).map_err(map_err)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1)).map_err(map_err)?;
    }
    // A rebuilt table must leave every reference intact.
    let broken: i64 =
        tx.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0)).map_err(map_err)?;
    if broken > 0 {
        return Err(StoreError::Incompatible(format!("{}: migration left {broken} broken references", path.display())));
    }
    tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}")).map_err(map_err)?;
    tx.commit().map_err(map_err)?;
    Ok(version < SCHEMA_VERSION)
}
