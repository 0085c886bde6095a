//! Params and records of the API token operations (issue 16). The store keeps a token's name, its
//! scopes and the hash of its secret (`shiftboss_core::token::hash_secret`), never the secret.

use crate::StoreError;
use shiftboss_core::Timestamp;
use shiftboss_core::token::{Scopes, check_name};

/// A token to create. The caller mints the secret, shows it once, and hands the store its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiToken {
    /// Who the token acts as (the actor of what it does): 1 to 64 visible ASCII characters,
    /// unique among live tokens (a revoked token's name may be taken again).
    pub name: String,
    /// What it may do: at least one scope.
    pub scopes: Scopes,
    /// `hash_secret(secret)`: 64 lower-case hex characters.
    pub secret_hash: String,
}

impl NewApiToken {
    /// Checks what does not need the database; stores call it before they write.
    pub fn validate(&self) -> Result<(), StoreError> {
        check_name(&self.name).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
        if self.scopes.is_empty() {
            return Err(StoreError::InvalidInput("a token needs at least one scope".into()));
        }
        check_hash(&self.secret_hash)
    }
}

/// Refuses what is not a hash as `hash_secret` writes it, so that no store holds a secret by
/// mistake (a caller that passed the secret itself).
pub fn check_hash(hash: &str) -> Result<(), StoreError> {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(StoreError::InvalidInput("a secret's hash must be 64 lower-case hex characters".into()));
    }
    Ok(())
}

/// A token as the store hands it out: never its secret nor its hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApiToken {
    /// The store's id for it.
    pub id: i64,
    /// Who the token acts as.
    pub name: String,
    /// What it may do.
    pub scopes: Scopes,
    /// When it was created, by the store's clock.
    pub created_at: Timestamp,
    /// When it was revoked; a revoked token authenticates nothing.
    pub revoked_at: Option<Timestamp>,
}

impl ApiToken {
    /// Whether it still authenticates.
    pub fn is_live(&self) -> bool {
        self.revoked_at.is_none()
    }
}
