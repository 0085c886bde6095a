//! The application's side of a chaos run: submitting every order until the store acknowledges it,
//! most from this process, every tenth by a process of its own that may be killed mid-submit.

use super::process_submit::{self, ProcessFigures, ProcessSubmitter};
use anyhow::Context;
use shiftboss::demo::workflow;
use shiftboss_core::TaskId;
use shiftboss_store::{Store, SubmitTask};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the submissions came to.
pub struct Submissions {
    pub acks: Vec<TaskId>,
    /// Failed tries of this process's submitters, repeated.
    pub retries: u64,
    pub by_process: ProcessFigures,
}

/// Submits orders 1..=n from `lanes` concurrent submitters in this process and one lane of
/// submitting processes, each order tried again until the store acknowledges it (a submission is
/// idempotent by key).
pub async fn submit_all(
    store: Arc<dyn Store>,
    n: u32,
    lanes: u32,
    version: u32,
    deadline: Instant,
    processes: ProcessSubmitter,
) -> anyhow::Result<Submissions> {
    let orders: Vec<(String, String)> = (1..=n)
        .filter(|k| process_submit::by_process(*k))
        .map(|k| {
            let (key, input) = workflow::order_input(k);
            (key, input.to_string())
        })
        .collect();
    let by_processes =
        tokio::task::spawn_blocking(move || process_submit::submit(&processes, &orders, version, deadline));
    let mut lanes_running = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let store = store.clone();
        lanes_running.spawn(async move {
            let (mut acks, mut retries) = (Vec::new(), 0u64);
            for k in (1..=n).filter(|k| k % lanes == lane && !process_submit::by_process(*k)) {
                let (key, input) = workflow::order_input(k);
                loop {
                    let task = SubmitTask {
                        domains: Default::default(),
                        correlation_id: None,
                        notify: None,
                        key: key.clone(),
                        workflow: "order".into(),
                        version: Some(version),
                        input: input.clone(),
                        priority: 0,
                        actor: "chaos".into(),
                    };
                    match store.submit_task(task).await {
                        Ok(s) => {
                            acks.push(s.task_id);
                            break;
                        }
                        Err(e) if Instant::now() < deadline => {
                            retries += 1;
                            tracing::debug!(error = %e, "submission failed; trying again");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => return Err(anyhow::Error::from(e).context(format!("submitting {key}"))),
                    }
                }
            }
            anyhow::Ok((acks, retries))
        });
    }
    let (mut acks, mut retries) = (Vec::new(), 0);
    while let Some(r) = lanes_running.join_next().await {
        let (a, r) = r.context("a submitter failed")??;
        acks.extend(a);
        retries += r;
    }
    let (by_process_acks, by_process) = by_processes.await.context("the submitting processes' lane failed")??;
    acks.extend(by_process_acks);
    Ok(Submissions { acks, retries, by_process })
}
