//! The demo's extra scheduler processes: `shiftboss serve` children sharing the store.
//!
//! Each child's standard input is a pipe from the demo and it runs with `--stop-when-stdin-closes`,
//! so it stops when the demo ends, however the demo ends (kill -9 included: the kernel closes the
//! pipe). The store's URL goes through the environment, not the command line, where `ps` would
//! show a password.

use super::DemoArgs;
use crate::fake_services::FakeService;
use crate::target::DbTarget;
use anyhow::Context;
use std::process::{Child, Command, Stdio};

pub struct Children(Vec<Child>);

pub fn start(db: &DbTarget, args: &DemoArgs, services: &[(&str, &FakeService)]) -> anyhow::Result<Children> {
    let exe = std::env::current_exe().context("finding the shiftboss executable for the extra schedulers")?;
    let mut children = Children(Vec::new());
    for n in 2..=args.schedulers {
        let mut cmd = Command::new(&exe);
        cmd.env("SHIFTBOSS_DB", db.raw())
            .env_remove("SHIFTBOSS_CONFIG")
            .args(["serve", "--roles", "scheduler", "--stop-when-stdin-closes"])
            .args(["--instance-id", &format!("{}-{n}", args.instance_id)])
            .args(["--poll-interval", "100ms"])
            // Its services listen on loopback, which the SSRF guard refuses unless allowed.
            .args(["--allow-outbound", "127.0.0.1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(n) = args.concurrency {
            cmd.args(["--concurrency", &n.to_string()]);
        }
        for (name, svc) in services {
            cmd.args(["--agent", &format!("{name}={}", svc.base_url)]);
        }
        children.0.push(cmd.spawn().context("starting an extra scheduler process")?);
    }
    Ok(children)
}

impl Children {
    /// Closes their standard input, so they stop claiming, finish or hand back what they run, and
    /// exit; waits for them.
    pub fn stop(mut self) {
        for c in &mut self.0 {
            drop(c.stdin.take());
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
        self.0.clear();
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        // Reached only on an early return: make sure none is left behind.
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
