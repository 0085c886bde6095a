//! Issue 7's clock property: a process whose wall clock is off by minutes must change no lease
//! decision, because every lease decision in the distributed mode uses PostgreSQL's clock. The
//! engine measures its own deadlines on the monotonic clock (`Instant`), which a wall-clock skew or
//! step does not move, and the PostgreSQL store takes `now` from the database once per transaction.
//!
//! So there is nothing process-local to skew: this test keeps it that way. A wall-clock read added
//! to the engine, the store contract or the PostgreSQL store fails it, and must come with a
//! reason and a skewed-clock test of its own. (The SQLite store's clock is the host's on purpose:
//! its processes share one host, and so one clock.)

use std::path::Path;

/// Ways Rust code reads the wall clock.
const WALL_CLOCK: [&str; 4] = ["SystemTime", "UNIX_EPOCH", "chrono::", "time::OffsetDateTime"];

fn wall_clock_reads(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            wall_clock_reads(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if WALL_CLOCK.iter().any(|w| code.contains(w)) {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
}

#[test]
fn no_lease_decision_of_the_distributed_mode_reads_the_process_wall_clock() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for c in ["shiftboss-engine", "shiftboss-store", "shiftboss-postgres"] {
        wall_clock_reads(&crates.join(c).join("src"), &mut found);
    }
    assert!(found.is_empty(), "wall-clock reads where lease decisions are made:\n{}", found.join("\n"));
    // The search itself works: the SQLite store does read the host's clock.
    let mut sqlite = Vec::new();
    wall_clock_reads(&crates.join("shiftboss-sqlite").join("src"), &mut sqlite);
    assert!(!sqlite.is_empty(), "the search found nothing where a wall-clock read is known to be");
}
