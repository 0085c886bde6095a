//! The first admin token: with no token in the store, `serve` makes one, writes its secret to a
//! file only its owner can read, and says where. Without it a fresh install could not be reached.

use shiftboss_core::token::{Scope, Scopes, hash_secret, mint_secret};
use shiftboss_store::{NewApiToken, Store, StoreError};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The bootstrap token's name.
pub const BOOTSTRAP_NAME: &str = "admin";

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("writing the admin token's secret to {path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
}

/// What happened at start.
#[derive(Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// Tokens exist: nothing was made.
    TokensExist,
    /// A token was made and its secret written to this file.
    Created(PathBuf),
    /// Another process made the first token at the same moment.
    MadeElsewhere,
}

/// Makes the first admin token when the store has none. The file is created new (never
/// overwritten: an existing file is an error that names it) with mode 0600.
pub async fn ensure_admin_token(store: &dyn Store, file: &Path) -> Result<Bootstrap, BootstrapError> {
    if !store.list_api_tokens().await?.is_empty() {
        return Ok(Bootstrap::TokensExist);
    }
    let secret = mint_secret();
    let file_err = |source| BootstrapError::File { path: file.to_owned(), source };
    // The file first: a token whose secret was never written would lock everyone out.
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(file).map_err(file_err)?;
    f.write_all(format!("{secret}\n").as_bytes()).and_then(|()| f.sync_all()).map_err(file_err)?;
    let made = store
        .create_api_token(NewApiToken {
            name: BOOTSTRAP_NAME.into(),
            scopes: Scopes::of([Scope::Admin]),
            secret_hash: hash_secret(&secret),
        })
        .await;
    match made {
        Ok(_) => Ok(Bootstrap::Created(file.to_owned())),
        Err(StoreError::Conflict(_)) => {
            // Another serve process won the race; the secret written here opens nothing.
            let _ = std::fs::remove_file(file);
            Ok(Bootstrap::MadeElsewhere)
        }
        Err(e) => {
            let _ = std::fs::remove_file(file);
            Err(e.into())
        }
    }
}
