//! `shiftboss tokens ...`: the API tokens the HTTP API authenticates (issue 16). The secret is
//! made here, printed once, and only its hash reaches the store.

use crate::target::DbTarget;
use anyhow::bail;
use clap::Subcommand;
use shiftboss_core::token::{Scopes, check_name, hash_secret, mint_secret};
use shiftboss_store::NewApiToken;

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Create a token and print its secret (on standard output, alone): it is shown this once,
    /// the store keeps only its hash.
    Create {
        /// Who the token acts as (the actor of what it does): 1 to 64 visible ASCII characters,
        /// unique among live tokens.
        #[arg(long)]
        name: String,
        /// What it may do, comma-separated: read, submit, operate, agent, admin (admin implies all).
        #[arg(long, value_name = "SCOPE,...")]
        scopes: Scopes,
    },
    /// List the tokens, live and revoked, oldest first (never their secrets).
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke the live token of this name: it authenticates nothing from now on.
    Revoke { name: String },
}

impl TokensCommand {
    pub async fn run(self, db: &DbTarget) -> anyhow::Result<()> {
        match self {
            TokensCommand::Create { name, scopes } => {
                // Before the store is opened (and made, for a new one): bad input changes nothing.
                check_name(&name)?;
                // Created with the store if needed: a token may be made before the first `serve`.
                let store = crate::patient::Patient::wrap(db.open(true).await?, crate::target::bounds().wait);
                let secret = mint_secret();
                let token =
                    store.create_api_token(NewApiToken { name, scopes, secret_hash: hash_secret(&secret) }).await?;
                eprintln!("token {:?} created with scopes {}", token.name, token.scopes);
                eprintln!("its secret follows; it is shown only this once (the store keeps only a hash):");
                println!("{secret}");
            }
            TokensCommand::List { json } => {
                let store = crate::patient::Patient::wrap(db.open(false).await?, crate::target::bounds().wait);
                let tokens = store.list_api_tokens().await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&tokens)?);
                    return Ok(());
                }
                println!("{:<24}  {:<36}  {:<24}  REVOKED", "NAME", "SCOPES", "CREATED");
                for t in &tokens {
                    let revoked = t.revoked_at.map_or_else(|| "-".to_owned(), |r| r.to_string());
                    println!(
                        "{:<24}  {:<36}  {:<24}  {revoked}",
                        t.name,
                        t.scopes.to_string(),
                        t.created_at.to_string()
                    );
                }
                if tokens.is_empty() {
                    println!("(no tokens)");
                }
            }
            TokensCommand::Revoke { name } => {
                let store = crate::patient::Patient::wrap(db.open(false).await?, crate::target::bounds().wait);
                if !store.revoke_api_token(&name).await? {
                    bail!("no live token named {name:?}");
                }
                println!("token {name:?} revoked");
            }
        }
        Ok(())
    }
}
