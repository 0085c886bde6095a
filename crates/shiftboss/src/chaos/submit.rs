//! The application's side of a chaos run: submitting every order until the store acknowledges it.

use crate::demo::workflow;
use anyhow::Context;
use shiftboss_core::TaskId;
use shiftboss_store::{Store, SubmitTask};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Submits orders 1..=n from `lanes` concurrent submitters, each order tried again until the
/// store acknowledges it (a submission is idempotent by key). Returns the acknowledged tasks and
/// how many tries failed.
pub async fn submit_all(
    store: Arc<dyn Store>,
    n: u32,
    lanes: u32,
    version: u32,
    deadline: Instant,
) -> anyhow::Result<(Vec<TaskId>, u64)> {
    let mut lanes_running = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let store = store.clone();
        lanes_running.spawn(async move {
            let (mut acks, mut retries) = (Vec::new(), 0u64);
            for k in (1..=n).filter(|k| k % lanes == lane) {
                let (key, input) = workflow::order_input(k);
                loop {
                    let task = SubmitTask {
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
    Ok((acks, retries))
}
