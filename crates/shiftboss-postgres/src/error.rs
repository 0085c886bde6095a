//! PostgreSQL and pool errors as store errors: whether a caller should retry is decided here.

use deadpool_postgres::PoolError;
use shiftboss_store::StoreError;
use tokio_postgres::error::SqlState;

pub fn map_err(e: tokio_postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        return map_db(db.code(), db.to_string());
    }
    // Without a server error: the connection broke or could not be made (a connect timeout is an
    // I/O error too). tokio-postgres does not expose its error kinds; the I/O cause is what tells.
    let io = std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
    if e.is_closed() || io {
        return StoreError::Unavailable(e.to_string());
    }
    StoreError::Backend(e.to_string())
}

/// How a statement refused because an earlier one of its transaction failed is reported; see [`first_cause`].
const ABORTED: &str = "an earlier statement of this transaction failed";

fn map_db(code: &SqlState, message: String) -> StoreError {
    if *code == SqlState::IN_FAILED_SQL_TRANSACTION {
        return StoreError::Backend(format!("{ABORTED}: {message}"));
    }
    let class = &code.code()[..2];
    match class {
        // 08: connection exception; 53: insufficient resources (too many connections, disk full);
        // 57: operator intervention (server shutting down, statement cancelled).
        "08" | "53" | "57" => return StoreError::Unavailable(message),
        _ => {}
    }
    // The same call may succeed on a second try. A read-only server is a standby, such as one
    // being promoted after a failover (P11).
    if [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::LOCK_NOT_AVAILABLE,
        SqlState::READ_ONLY_SQL_TRANSACTION,
    ]
    .contains(code)
    {
        return StoreError::Unavailable(message);
    }
    if [
        SqlState::UNDEFINED_TABLE,
        SqlState::UNDEFINED_COLUMN,
        SqlState::UNDEFINED_FUNCTION,
        SqlState::INVALID_SCHEMA_NAME,
        SqlState::INVALID_CATALOG_NAME,
        SqlState::UNDEFINED_OBJECT,
    ]
    .contains(code)
    {
        return StoreError::Incompatible(format!(
            "the database does not have the shiftboss schema this build expects: {message}"
        ));
    }
    if [SqlState::CHARACTER_NOT_IN_REPERTOIRE, SqlState::UNTRANSLATABLE_CHARACTER].contains(code) {
        // PostgreSQL text cannot hold a NUL character; SQLite can.
        return StoreError::InvalidInput(format!("text that PostgreSQL cannot store (a NUL character?): {message}"));
    }
    StoreError::Backend(message)
}

/// Of the errors of statements sent together, the one that caused the others: after a failed
/// statement PostgreSQL answers every later one of the transaction with "current transaction is
/// aborted", which says nothing of what went wrong, and those may complete first.
pub fn first_cause(errors: impl IntoIterator<Item = Option<StoreError>>) -> StoreError {
    let mut consequence = None;
    for e in errors.into_iter().flatten() {
        match &e {
            StoreError::Backend(m) if m.starts_with(ABORTED) => consequence = consequence.or(Some(e)),
            _ => return e,
        }
    }
    consequence.expect("first_cause is called with at least one error")
}

pub fn pool_err(e: PoolError) -> StoreError {
    match e {
        // A new connection that failed without a server's answer (every host refused it, or was
        // silent past its bound): the store is out of reach, not broken.
        PoolError::Backend(e) if e.as_db_error().is_none() => StoreError::Unavailable(e.to_string()),
        PoolError::Backend(e) => map_err(e),
        PoolError::Timeout(t) => StoreError::Unavailable(format!("no database connection within the timeout ({t:?})")),
        PoolError::Closed => StoreError::Unavailable("the connection pool is closed".into()),
        PoolError::PostCreateHook(e) => StoreError::Unavailable(e.to_string()),
        PoolError::NoRuntimeSpecified => StoreError::Backend("the connection pool has no runtime".into()),
    }
}

/// A stored value that does not parse: something other than shiftboss wrote it.
pub fn bad_column(column: &str, problem: impl std::fmt::Display) -> StoreError {
    StoreError::Incompatible(format!("column {column} holds a value this build cannot read: {problem}"))
}
