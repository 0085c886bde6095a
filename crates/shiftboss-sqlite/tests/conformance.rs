//! The store contract's conformance suite, run against SQLite: each test gets a temp dir of its
//! own with one database file in it.

use shiftboss_sqlite::{Durability, OpenOptions, SqliteStore};
use shiftboss_store::Clock;
use shiftboss_store_conformance::Fixture;

struct SqliteFixture {
    dir: tempfile::TempDir,
}

impl SqliteFixture {
    fn new() -> Self {
        SqliteFixture { dir: tempfile::tempdir().expect("temp dir") }
    }
}

impl Fixture for SqliteFixture {
    type Store = SqliteStore;

    /// Each call opens a new connection to the same file, as a second process would.
    async fn open(&self, clock: Clock) -> SqliteStore {
        // Normal durability: the suite checks behaviour, not fsync, and fsync per commit would
        // make the many small transactions slow. Behaviour is the same at Full.
        let opts = OpenOptions { durability: Durability::Normal, ..OpenOptions::default() };
        SqliteStore::open_with_clock(self.dir.path().join("state.db"), &opts, clock).expect("open the store")
    }
}

shiftboss_store_conformance::conformance_suite!(SqliteFixture::new());
