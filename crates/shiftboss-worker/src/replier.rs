//! The worker's replies, sent in batches: every answer ready while the last batch was on the way
//! goes in the next request (`POST /v1/agents/replies`), so a worker running hundreds of steps
//! does not send a request per step. A batch that gets no answer, or a 5xx, is sent again (a
//! reply already applied comes back as a repeat and changes nothing), a bounded number of times.

use crate::client::{Client, ClientError};
use crate::protocol::{BatchFailure, BatchReply, ReplyBatch};
use crate::worker::Failure;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::time::sleep;

/// How many times a batch is sent again after no answer or a 5xx, and the first pause.
const TRIES: u32 = 6;
const BACKOFF: Duration = Duration::from_millis(100);
/// The most replies in one request (the server takes up to 1,000).
const MAX_BATCH: usize = 500;
/// Batches in flight at once.
const SENDERS: usize = 2;

/// What a step's run ended with.
pub(crate) enum Answer {
    Done(Value),
    Failed(Failure),
}

pub(crate) struct Ready {
    pub step_id: String,
    pub lease_token: String,
    pub answer: Answer,
}

type Queued = (Ready, oneshot::Sender<Result<(), ClientError>>);

#[derive(Clone)]
pub(crate) struct Replier {
    queue: mpsc::UnboundedSender<Queued>,
}

impl Replier {
    /// Starts the senders; they end when every `Replier` clone is dropped and the queue is empty.
    pub(crate) fn start(client: Client, worker: Arc<str>) -> Replier {
        let (queue, waiting) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(waiting));
        for _ in 0..SENDERS {
            tokio::spawn(send_batches(client.clone(), worker.clone(), waiting.clone()));
        }
        Replier { queue }
    }

    /// Queues a reply and waits for the server's verdict on it.
    pub(crate) async fn send(&self, ready: Ready) -> Result<(), ClientError> {
        let (tx, rx) = oneshot::channel();
        let gone = || ClientError::Setup("the worker's reply senders stopped".into());
        self.queue.send((ready, tx)).map_err(|_| gone())?;
        rx.await.unwrap_or_else(|_| Err(gone()))
    }
}

async fn send_batches(client: Client, worker: Arc<str>, waiting: Arc<Mutex<mpsc::UnboundedReceiver<Queued>>>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        {
            let mut rx = waiting.lock().await;
            if rx.recv_many(&mut batch, MAX_BATCH).await == 0 {
                return;
            }
        }
        let (ready, answers): (Vec<Ready>, Vec<_>) = std::mem::take(&mut batch).into_iter().unzip();
        let body = ReplyBatch { worker: &worker, replies: ready.iter().map(as_wire).collect() };
        let mut pause = BACKOFF;
        let mut sent = client.replies(&body).await;
        for _ in 1..TRIES {
            match &sent {
                Err(e) if e.is_transient() => {
                    sleep(pause).await;
                    pause *= 2;
                    sent = client.replies(&body).await;
                }
                _ => break,
            }
        }
        match sent {
            Ok(results) => {
                for ((answer, result), r) in answers.into_iter().zip(results).zip(&ready) {
                    let verdict = match result.outcome.as_str() {
                        "applied" | "repeated" => Ok(()),
                        "lease_lost" => Err(ClientError::LeaseLost(r.step_id.clone())),
                        other => Err(ClientError::Refused {
                            status: 422,
                            code: other.to_owned(),
                            detail: result.detail.unwrap_or_default(),
                        }),
                    };
                    let _ = answer.send(verdict);
                }
            }
            Err(e) => {
                for answer in answers {
                    let _ = answer.send(Err(e.clone()));
                }
            }
        }
    }
}

fn as_wire(r: &Ready) -> BatchReply<'_> {
    let (mut output, mut failure, mut postpone_ms) = (None, None, None);
    match &r.answer {
        Answer::Done(v) => output = Some(v),
        Answer::Failed(Failure::Transient(why)) => failure = Some(BatchFailure { reason: why, permanent: false }),
        Answer::Failed(Failure::Permanent(why)) => failure = Some(BatchFailure { reason: why, permanent: true }),
        // The server takes at most a year; a longer wait is cut to it rather than refused.
        Answer::Failed(Failure::Postpone(after)) => {
            postpone_ms = Some((after.as_millis().min(MAX_POSTPONE_MS as u128)) as u64);
        }
    }
    BatchReply { step_id: &r.step_id, lease_token: &r.lease_token, output, failure, postpone_ms }
}

/// The longest postponement the server takes (a year), in milliseconds.
const MAX_POSTPONE_MS: u64 = 365 * 24 * 3600 * 1000;
