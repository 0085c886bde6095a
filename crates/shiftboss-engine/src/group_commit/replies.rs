//! Remote workers' replies grouped: `record_replies` already answers each reply on its own
//! (applied, a repeat, or refused as stale), so a batch needs no second pass. Its actor is one
//! instance per call, so a batch is written as one call per worker in it, in the order the
//! workers first appear; with a few workers that is a few transactions for many replies.

use super::BatchWrite;
use crate::metrics::Metrics;
use async_trait::async_trait;
use shiftboss_core::InstanceId;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{RecordReplies, Reply, ReplyOutcome, Store, StoreError};
use std::sync::Arc;

pub(crate) struct Replies {
    pub policies: Arc<RetryPolicies>,
}

#[async_trait]
impl BatchWrite for Replies {
    type Item = (InstanceId, Reply);
    type Out = ReplyOutcome;

    async fn write(&self, store: &dyn Store, batch: Vec<(InstanceId, Reply)>) -> Vec<Result<ReplyOutcome, StoreError>> {
        let mut out: Vec<Option<Result<ReplyOutcome, StoreError>>> = (0..batch.len()).map(|_| None).collect();
        let mut groups: Vec<(InstanceId, Vec<usize>, Vec<Reply>)> = Vec::new();
        for (i, (instance, reply)) in batch.into_iter().enumerate() {
            match groups.iter_mut().find(|(who, ..)| *who == instance) {
                Some((_, at, replies)) => {
                    at.push(i);
                    replies.push(reply);
                }
                None => groups.push((instance, vec![i], vec![reply])),
            }
        }
        for (instance, at, replies) in groups {
            let p = RecordReplies { instance, replies, policies: self.policies.clone() };
            match store.record_replies(p).await {
                Ok(outcomes) if outcomes.len() == at.len() => {
                    for (i, o) in at.into_iter().zip(outcomes) {
                        out[i] = Some(Ok(o));
                    }
                }
                Ok(outcomes) => {
                    let e = StoreError::Backend(format!("{} replies got {} outcomes", at.len(), outcomes.len()));
                    at.into_iter().for_each(|i| out[i] = Some(Err(e.clone())));
                }
                Err(e) => at.into_iter().for_each(|i| out[i] = Some(Err(e.clone()))),
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(StoreError::Backend("a reply was not written".into()))))
            .collect()
    }

    fn count(&self, metrics: &Metrics, n: usize) {
        Metrics::add(&metrics.remote_reply_batches, 1);
        Metrics::add(&metrics.remote_replies, n as u64);
    }
}
