//! The `shiftboss` command line as a library: what the binary (`main.rs`) runs, and what the lab
//! (`crates/shiftboss-lab`: the chaos harness and the benchmark drivers) reuses of it: the demo's
//! workflow and fake services, the store target parsing, and `serve`'s entry for its worker
//! processes. `backend` is what the operator commands ask of shiftboss, answered by the store
//! itself (`--db`) or by a server's HTTP API (`--server`). Nothing here depends on the lab.

pub mod backend;
pub mod commands;
pub mod config;
pub mod demo;
pub mod fake_services;
pub mod instance;
pub mod open_files;
pub mod patient;
pub mod target;
