//! `shiftboss migrate`: bring a state store's schema to this build's version.

use crate::target::DbTarget;

pub async fn run(db: &DbTarget) -> anyhow::Result<()> {
    // Opening applies the migrations this build knows, and refuses a newer schema unchanged.
    db.open(true).await?;
    match db {
        DbTarget::Sqlite(_) => println!("{db}: schema at version {}", shiftboss_sqlite::SCHEMA_VERSION),
        DbTarget::Postgres(_) => println!("{db}: schema at version {}", shiftboss_postgres::SCHEMA_VERSION),
    }
    Ok(())
}
