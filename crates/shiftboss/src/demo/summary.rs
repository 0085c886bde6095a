//! The demo's closing report.

use crate::fake_services::Ledger;
use shiftboss_core::{StepState, TaskState};
use shiftboss_engine::metrics::MetricsSnapshot;
use shiftboss_store::Summary;
use std::time::Duration;

pub struct Report {
    pub summary: Summary,
    /// Steps that became processed during this run, by any scheduler process.
    pub processed_this_run: u64,
    pub schedulers: u32,
    pub metrics: MetricsSnapshot,
    pub elapsed: Duration,
    pub applied_twice: Vec<(String, u64)>,
    pub duplicates_dropped: u64,
    /// Orders refunded and orders whose stock was released, by the services' ledger.
    pub refunded: u64,
    pub released: u64,
}

impl Report {
    pub fn applied_twice_total(&self) -> u64 {
        self.applied_twice.iter().map(|(_, n)| n).sum()
    }

    pub fn all_terminal(&self) -> bool {
        TaskState::ALL.iter().filter(|s| !s.is_terminal()).all(|s| self.summary.tasks_in(*s) == 0)
    }

    pub fn print(&self) {
        let s = &self.summary;
        let total: u64 = s.tasks.iter().map(|(_, n)| n).sum();
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        println!("shiftboss demo: summary");
        println!(
            "  orders                {total} (completed {}, compensated {}, failed {}, cancelled {}, still running {})",
            s.tasks_in(TaskState::Completed),
            s.tasks_in(TaskState::Compensated),
            s.tasks_in(TaskState::Failed),
            s.tasks_in(TaskState::Cancelled),
            s.tasks_in(TaskState::Running) + s.tasks_in(TaskState::Compensating) + s.tasks_in(TaskState::Paused),
        );
        println!(
            "  compensated           {} orders undone after a refusal: {} refunded, {} stock released",
            s.tasks_in(TaskState::Compensated),
            self.refunded,
            self.released
        );
        println!(
            "  steps                 processed {}, in error {}, pending {}, processing {}",
            s.steps_in(StepState::Processed),
            s.steps_in(StepState::Error),
            s.steps_in(StepState::Pending),
            s.steps_in(StepState::Processing),
        );
        println!(
            "  retried               {} tries after transient faults (this run, this process); {} steps claimed more than once",
            self.metrics.in_call_retries, s.steps_retried
        );
        println!(
            "  recovered             {} steps finished after a timeout or a restart ({} lease expiries, {} released at restart)",
            s.recovered_after_expiry, s.expiries, s.releases
        );
        println!("  late replies refused  {}", s.rejected_replies);
        if s.errors.is_empty() {
            println!("  in error              none");
        } else {
            println!("  in error (why)");
            for (why, n) in &s.errors {
                println!("    {n:>6} × {why}");
            }
        }
        let twice = if self.applied_twice.is_empty() {
            String::new()
        } else {
            let per: Vec<String> = self.applied_twice.iter().map(|(svc, n)| format!("{svc} {n}")).collect();
            format!(" ({})", per.join(", "))
        };
        println!(
            "  effects applied twice {}{twice}; repeated requests dropped by idempotency key: {}",
            self.applied_twice_total(),
            self.duplicates_dropped
        );
        println!("  elapsed               {:.2} s (this run)", secs);
        println!(
            "  throughput            {:.0} steps/s ({} steps processed this run by {} scheduler process{})",
            self.processed_this_run as f64 / secs,
            self.processed_this_run,
            self.schedulers,
            if self.schedulers == 1 { "" } else { "es" }
        );
    }
}

pub struct LedgerFigures {
    pub applied_twice: Vec<(String, u64)>,
    pub duplicates_dropped: u64,
    pub refunded: u64,
    pub released: u64,
}

pub fn ledger_figures(ledger: &Ledger) -> anyhow::Result<LedgerFigures> {
    Ok(LedgerFigures {
        applied_twice: ledger.applied_twice()?,
        duplicates_dropped: ledger.duplicates_dropped()?,
        refunded: ledger.orders_with("refund")?,
        released: ledger.orders_with("release")?,
    })
}
