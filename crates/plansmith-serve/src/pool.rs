//! Model work off the async executor: `N` dedicated worker threads fed by a bounded queue.
//!
//! A handler submits a job and awaits a `tokio::sync::oneshot` receiver. Dropping the
//! [`Ticket`] (client gone, timeout) marks the job cancelled: a worker that picks it up later
//! skips it. A job already running is not interrupted; its result is discarded.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// What a worker runs for one job.
pub type Work<I, O> = Arc<dyn Fn(&I) -> O + Send + Sync>;

struct Job<I, O> {
    input: I,
    cancelled: Arc<AtomicBool>,
    reply: oneshot::Sender<Done<O>>,
    enqueued: Instant,
}

/// A finished job: its output and how long it waited in the queue.
#[derive(Debug)]
pub struct Done<O> {
    pub output: Result<O, String>,
    pub waited: Duration,
}

/// Live counters of the pool.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Jobs submitted and not yet picked up by a worker.
    pub queued: AtomicUsize,
    /// Jobs a worker is running right now.
    pub running: AtomicUsize,
    pub completed: AtomicU64,
    /// Jobs skipped because their client had gone (or timed out) before a worker got to them.
    pub skipped: AtomicU64,
    /// Jobs refused because the queue was full.
    pub rejected: AtomicU64,
    /// Jobs whose work panicked (answered as an internal error).
    pub panicked: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitError {
    Full,
    Closed,
}

/// A submitted job. Await [`Ticket::wait`]; dropping the ticket cancels the job.
pub struct Ticket<O> {
    rx: oneshot::Receiver<Done<O>>,
    cancelled: Arc<AtomicBool>,
    finished: bool,
}

impl<O> Ticket<O> {
    /// The result, or `None` if the pool shut down. Dropping this future before it is ready
    /// (client gone, timeout) cancels the job.
    pub async fn wait(mut self) -> Option<Done<O>> {
        let done = (&mut self.rx).await.ok();
        self.finished = true;
        done
    }
}

impl<O> Drop for Ticket<O> {
    fn drop(&mut self) {
        if !self.finished {
            self.cancelled.store(true, Ordering::Relaxed);
        }
    }
}

pub struct Pool<I, O> {
    tx: Option<SyncSender<Job<I, O>>>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<PoolStats>,
    workers: usize,
    capacity: usize,
}

impl<I: Send + 'static, O: Send + 'static> Pool<I, O> {
    /// `workers` threads (at least one); `queue` jobs may wait beyond those being run.
    pub fn new(workers: usize, queue: usize, work: Work<I, O>) -> std::io::Result<Self> {
        let workers = workers.max(1);
        let (tx, rx) = sync_channel::<Job<I, O>>(queue);
        let rx = Arc::new(Mutex::new(rx));
        let stats = Arc::new(PoolStats::default());
        let mut threads = Vec::with_capacity(workers);
        for i in 0..workers {
            let (rx, work, stats) = (rx.clone(), work.clone(), stats.clone());
            let t = std::thread::Builder::new()
                .name(format!("plansmith-worker-{i}"))
                .spawn(move || worker(&rx, &*work, &stats))?;
            threads.push(t);
        }
        Ok(Pool {
            tx: Some(tx),
            threads,
            stats,
            workers,
            capacity: queue,
        })
    }

    pub fn submit(&self, input: I) -> Result<Ticket<O>, SubmitError> {
        let tx = self.tx.as_ref().ok_or(SubmitError::Closed)?;
        let (reply, rx) = oneshot::channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        let job = Job {
            input,
            cancelled: cancelled.clone(),
            reply,
            enqueued: Instant::now(),
        };
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        match tx.try_send(job) {
            Ok(()) => Ok(Ticket {
                rx,
                cancelled,
                finished: false,
            }),
            Err(e) => {
                self.stats.queued.fetch_sub(1, Ordering::Relaxed);
                match e {
                    TrySendError::Full(_) => {
                        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
                        Err(SubmitError::Full)
                    }
                    TrySendError::Disconnected(_) => Err(SubmitError::Closed),
                }
            }
        }
    }

    pub fn stats(&self) -> &PoolStats {
        &self.stats
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// How many jobs may wait for a worker.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl<I, O> Drop for Pool<I, O> {
    fn drop(&mut self) {
        // Closing the channel lets every worker finish its job and exit.
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn worker<I, O>(
    rx: &Mutex<Receiver<Job<I, O>>>,
    work: &(dyn Fn(&I) -> O + Send + Sync),
    stats: &PoolStats,
) {
    loop {
        let job = {
            let Ok(rx) = rx.lock() else { return };
            match rx.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        stats.queued.fetch_sub(1, Ordering::Relaxed);
        if job.cancelled.load(Ordering::Relaxed) || job.reply.is_closed() {
            stats.skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let waited = job.enqueued.elapsed();
        stats.running.fetch_add(1, Ordering::Relaxed);
        let output = match std::panic::catch_unwind(AssertUnwindSafe(|| work(&job.input))) {
            Ok(o) => Ok(o),
            Err(p) => {
                stats.panicked.fetch_add(1, Ordering::Relaxed);
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                Err(format!("the planner panicked: {what}"))
            }
        };
        stats.running.fetch_sub(1, Ordering::Relaxed);
        stats.completed.fetch_add(1, Ordering::Relaxed);
        let _ = job.reply.send(Done { output, waited });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    type Gated = (Pool<u32, u32>, mpsc::Sender<()>, Arc<Mutex<Vec<u32>>>);

    /// A pool whose one worker blocks on a gate until the test opens it.
    fn gated() -> Gated {
        let (gate_tx, gate_rx) = mpsc::channel::<()>();
        let gate = Mutex::new(gate_rx);
        let ran = Arc::new(Mutex::new(Vec::new()));
        let ran2 = ran.clone();
        let work: Work<u32, u32> = Arc::new(move |x: &u32| {
            gate.lock().unwrap().recv().unwrap();
            ran2.lock().unwrap().push(*x);
            x * 2
        });
        (Pool::new(1, 1, work).unwrap(), gate_tx, ran)
    }

    #[tokio::test]
    async fn full_queue_is_refused_and_results_come_back() {
        let (pool, gate, _) = gated();
        let a = pool.submit(1).unwrap();
        // Wait until the worker holds job 1, so the queue slot is free again.
        while pool.stats().running.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let b = pool.submit(2).unwrap();
        assert_eq!(pool.submit(3).err(), Some(SubmitError::Full));
        assert_eq!(pool.stats().rejected.load(Ordering::Relaxed), 1);
        gate.send(()).unwrap();
        gate.send(()).unwrap();
        assert_eq!(a.wait().await.unwrap().output, Ok(2));
        assert_eq!(b.wait().await.unwrap().output, Ok(4));
    }

    #[tokio::test]
    async fn a_dropped_ticket_is_skipped() {
        let (pool, gate, ran) = gated();
        let a = pool.submit(1).unwrap();
        while pool.stats().running.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let b = pool.submit(2).unwrap();
        drop(b); // the client went away while job 2 waited
        gate.send(()).unwrap();
        assert_eq!(a.wait().await.unwrap().output, Ok(2));
        while pool.stats().skipped.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let c = pool.submit(3).unwrap();
        gate.send(()).unwrap();
        assert_eq!(c.wait().await.unwrap().output, Ok(6));
        assert_eq!(*ran.lock().unwrap(), vec![1, 3]);
        assert_eq!(pool.stats().skipped.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_panic_is_an_error_not_a_dead_worker() {
        let work: Work<u32, u32> = Arc::new(|x: &u32| if *x == 0 { panic!("boom") } else { *x });
        let pool = Pool::new(1, 4, work).unwrap();
        let e = pool
            .submit(0)
            .unwrap()
            .wait()
            .await
            .unwrap()
            .output
            .unwrap_err();
        assert!(e.contains("boom"), "{e}");
        assert_eq!(pool.submit(7).unwrap().wait().await.unwrap().output, Ok(7));
    }
}
