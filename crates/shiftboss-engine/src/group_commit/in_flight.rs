//! The batches being written, which a writer that has gathered a few writes looks at before it
//! starts a transaction of its own (see the module above: while another batch commits, it gathers
//! until that one ends or it holds as many).

use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Notify, mpsc};

/// The batches being written, for a writer deciding whether to gather more (see the module's
/// text).
#[derive(Default)]
pub(super) struct InFlight {
    /// Batches being written, and the largest of them (0 when none).
    batches: AtomicUsize,
    largest: AtomicUsize,
    ended: Notify,
}

impl InFlight {
    /// Adds to `batch` what arrives until no batch is being written, a batch being written ends,
    /// or `batch` holds as many as the largest one being written (or `max`). False when the
    /// queue closed with nothing gathered.
    pub(super) async fn gather<T>(&self, rx: &mut mpsc::UnboundedReceiver<T>, batch: &mut Vec<T>, max: usize) -> bool {
        // Registered before the count is read, so that an end in between is not missed.
        let ended = self.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        loop {
            let enough = self.largest.load(Ordering::Acquire).min(max);
            if self.batches.load(Ordering::Acquire) == 0 || batch.len() >= enough {
                return true;
            }
            tokio::select! {
                n = rx.recv_many(batch, max - batch.len()) => if n == 0 {
                    return !batch.is_empty();
                },
                _ = &mut ended => return true,
            }
        }
    }

    /// Counts a batch of `n` as being written until the guard drops.
    pub(super) fn writing(&self, n: usize) -> Writing<'_> {
        self.batches.fetch_add(1, Ordering::AcqRel);
        self.largest.fetch_max(n, Ordering::AcqRel);
        Writing(self)
    }
}

pub(super) struct Writing<'a>(&'a InFlight);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        // The last batch out resets the largest; with others still writing it stays an upper
        // bound, which only makes a gathering writer wait for an end instead of a size.
        if self.0.batches.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.largest.store(0, Ordering::Release);
        }
        self.0.ended.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer gathering `first` and what arrives on `rx`, on a task of its own: the test's
    /// runtime has one thread, so the task runs only when the test yields.
    fn gathering(
        in_flight: &Arc<InFlight>,
        mut rx: mpsc::UnboundedReceiver<u32>,
        first: u32,
    ) -> tokio::task::JoinHandle<Vec<u32>> {
        let in_flight = in_flight.clone();
        tokio::spawn(async move {
            let mut batch = vec![first];
            assert!(in_flight.gather(&mut rx, &mut batch, 8).await);
            batch
        })
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn with_nothing_being_written_a_writer_goes_with_what_it_has() {
        let in_flight = Arc::new(InFlight::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = gathering(&in_flight, rx, 1);
        settle().await;
        assert!(writer.is_finished(), "a lone write is not held back");
        drop(tx);
        assert_eq!(writer.await.unwrap(), [1]);
    }

    #[tokio::test]
    async fn while_a_batch_is_written_the_next_gathers_up_to_its_size() {
        let in_flight = Arc::new(InFlight::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let _three = in_flight.writing(3);
        let writer = gathering(&in_flight, rx, 1);
        tx.send(2).unwrap();
        settle().await;
        assert!(!writer.is_finished(), "two of three: still gathering");
        tx.send(3).unwrap();
        tx.send(4).unwrap();
        assert_eq!(writer.await.unwrap(), [1, 2, 3, 4], "as big as the batch in flight, with what had arrived");
    }

    #[tokio::test]
    async fn a_gathering_writer_goes_when_the_batch_in_flight_ends() {
        let in_flight = Arc::new(InFlight::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let three = in_flight.writing(3);
        let writer = gathering(&in_flight, rx, 1);
        settle().await;
        assert!(!writer.is_finished());
        drop(three);
        settle().await;
        assert!(writer.is_finished(), "the end of the batch in flight sends it");
        drop(tx);
        assert_eq!(writer.await.unwrap(), [1]);
        assert_eq!(in_flight.largest.load(Ordering::Acquire), 0, "nothing in flight any more");
    }
}
