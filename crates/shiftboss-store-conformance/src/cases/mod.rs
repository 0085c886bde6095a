//! The cases, one module per store operation. Each `pub async fn` takes a fresh fixture and panics
//! when the behaviour its name states is broken. [`crate::conformance_suite!`] lists them all.

pub mod archive;
pub mod buckets;
pub mod bulk;
pub mod cancel;
pub mod claim;
pub mod compensation;
pub mod concurrency;
pub mod control;
pub mod cursors;
pub mod expire;
pub mod fencing;
pub mod handoff;
pub mod jobs;
pub mod leader;
pub mod next;
pub mod operator;
pub mod paging;
pub mod policies;
pub mod query;
pub mod queues;
pub mod rates;
pub mod reconcile;
pub mod register;
pub mod release;
pub mod replies;
pub mod resubmit;
pub mod stalled;
pub mod stream;
pub mod submit;
pub mod submit_batch;
pub mod tokens;
pub mod vocabulary;
pub mod webhooks;
pub mod worker_notes;
pub mod workers;
