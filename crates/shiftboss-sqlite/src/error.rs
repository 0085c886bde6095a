//! rusqlite errors as store errors.

use shiftboss_store::StoreError;

pub fn map_err(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::DatabaseBusy | C::DatabaseLocked) => StoreError::Unavailable(e.to_string()),
        Some(C::NotADatabase | C::DatabaseCorrupt) => {
            StoreError::Incompatible(format!("the database file is damaged: {e}"))
        }
        Some(C::DiskFull | C::CannotOpen | C::SystemIoFailure) => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Backend(e.to_string()),
    }
}

/// A value in a row that does not parse: the file was changed by something other than shiftboss.
pub fn bad_column(column: &str, problem: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("column {column}: {problem}").into(),
    )
}
