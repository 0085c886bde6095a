//! What the lab's tests share: the `shiftboss-lab` binary with nothing inherited that would choose
//! its store or config, and the PostgreSQL test database's URL (or a loud skip).
#![allow(dead_code)] // each test file uses its own part of this module

use std::process::{Command, Stdio};

/// The `shiftboss-lab` binary, with nothing inherited that would choose its store or config, or
/// arm it to die.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shiftboss-lab"));
    c.env_remove("SHIFTBOSS_DB")
        .env_remove("SHIFTBOSS_CONFIG")
        .env_remove("SHIFTBOSS_INSTANCE_ID")
        .env_remove("SHIFTBOSS_ROLES")
        .env_remove("SHIFTBOSS_FAULT")
        .stdin(Stdio::null());
    c
}

/// The environment variable that names the test database.
pub const URL_VAR: &str = "SHIFTBOSS_TEST_PG";
/// The local database CI uses when the variable is not set.
pub const LOCAL_PG: &str = "postgres://postgres@127.0.0.1:5432/test";

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The test database's URL, or None when this test should be skipped: outside CI without
/// `SHIFTBOSS_TEST_PG` a loud message says so; under CI the test runs (on the local database if
/// the variable is not set) and fails if the database cannot be reached.
pub fn test_db() -> Option<String> {
    if let Ok(url) = std::env::var(URL_VAR)
        && !url.trim().is_empty()
    {
        return Some(url);
    }
    if under_ci() {
        return Some(LOCAL_PG.to_owned());
    }
    let test = std::thread::current().name().unwrap_or("a PostgreSQL test").to_owned();
    eprintln!(
        "\n\
         ************************************************************************\n\
         SKIPPED {test}: {URL_VAR} is not set, so the chaos harness was NOT run\n\
         on PostgreSQL. Run with {URL_VAR}={LOCAL_PG} (under CI this runs).\n\
         ************************************************************************\n"
    );
    None
}
