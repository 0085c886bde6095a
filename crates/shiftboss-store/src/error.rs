//! What can go wrong in a store, typed so that callers know whether to retry.

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Something named by the caller does not exist.
    #[error("{what} {id} not found")]
    NotFound {
        /// What kind of thing: "task", "step", "workflow", "database file"...
        what: &'static str,
        /// How the caller named it: an id, a name and version, a path.
        id: String,
    },
    /// The request is well formed but does not fit the current state (such as resubmitting a step
    /// that is not in Error). Nothing was changed.
    #[error("{0}")]
    Conflict(String),
    /// The request itself is wrong (such as an unknown workflow). Nothing was changed.
    #[error("{0}")]
    InvalidInput(String),
    /// A leader-only write from a caller whose leader term has lapsed. Nothing was changed.
    #[error("not the leader of {0} (the lease lapsed or another instance holds it)")]
    NotLeader(String),
    /// The database is busy or out of reach for now; the same call may succeed later.
    #[error("state store unavailable: {0}")]
    Unavailable(String),
    /// The file or schema is not one this version can use. Nothing was changed.
    #[error("{0}")]
    Incompatible(String),
    /// Anything else the database reported.
    #[error("state store error: {0}")]
    Backend(String),
}

impl StoreError {
    /// Whether the same call is worth trying again later.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}
