//! The store contract's conformance suite, run against PostgreSQL: each test gets a fresh schema of
//! its own, migrated, and dropped when the test ends.
//!
//! Needs `SHIFTBOSS_TEST_PG` (such as postgres://postgres@127.0.0.1:5432/test); without it each
//! test says loudly that it skipped, or fails under CI (see `common::test_db`).

mod common;

use common::TestSchema;
use shiftboss_postgres::PostgresStore;
use shiftboss_store::Clock;
use shiftboss_store_conformance::Fixture;

struct PgFixture {
    schema: TestSchema,
}

impl PgFixture {
    /// None when the test is to be skipped.
    async fn new() -> Option<Self> {
        let url = common::test_db()?;
        Some(PgFixture { schema: TestSchema::migrated(&url).await })
    }
}

impl Fixture for PgFixture {
    type Store = PostgresStore;

    /// Each call opens a new pool onto the same schema, as a second process would. The schema is
    /// migrated already: a handle only checks its version.
    async fn open(&self, clock: Clock) -> PostgresStore {
        PostgresStore::connect_with_clock(&self.schema.url, &self.schema.options(false), clock)
            .await
            .unwrap_or_else(|e| panic!("open a store on schema {}: {e}", self.schema.name))
    }
}

// `return` leaves the test (it is expanded inside each test's body) when the database is not set.
shiftboss_store_conformance::conformance_suite!(match PgFixture::new().await {
    Some(f) => f,
    None => return,
});
