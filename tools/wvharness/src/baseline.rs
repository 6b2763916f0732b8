//! The machine's limits, measured in the same run as the benchmarks they calibrate.
//!
//! The machines this runs on are shared and small (2 cores), so absolute times drift from run
//! to run by more than the differences worth reporting. Each benchmark number is therefore
//! printed as a ratio to what the same machine does, at the same moment, with the cheapest
//! mechanism that could possibly do the job: a cache line bounced between two threads (the floor
//! of any polling hand-off), a futex wake (the floor of any sleeping hand-off, across CPUs and
//! on one CPU), `memcpy` (the floor of moving bytes), a single-producer/single-consumer ring
//! of 64-byte slots (the floor of handing small messages from one CPU to the other), an
//! uncontended mutex (the unit of a system call's bookkeeping) and a TCP loopback connection
//! (what a connection costs without RDMA).
//!
//! Every limit is timed per iteration, as perftest times each post, and reported as the median
//! and 99th percentile of those samples: a median of batch means is not the same number (a
//! batch mean carries every slow iteration in it, so its median sits above the per-iteration
//! median — 11–54 % above it for the futex wake on these machines). Each sample includes one
//! read of the clock, as each of the benchmarks' samples does; what a read costs is itself a
//! limit ([`clock_read`]).
//!
//! Two limits cannot be timed one operation at a time, and say so in their names: an
//! uncontended mutex lock + unlock takes about 5 ns here, below the clock's resolution (its
//! readings step by 10 ns on these virtual machines) and a fraction of one clock read (20–50
//! ns), so a per-iteration sample would measure the clock, not the mutex; it is timed over
//! batches of 64. `memcpy` below 64 KiB is timed over groups of copies, and the ring's
//! message rate over batches of messages, for the same reason.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Per-iteration samples and their order statistics.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// The samples, sorted ascending (ns per operation, or bytes per second for a bandwidth).
    pub samples: Vec<f64>,
}

impl Measured {
    /// Sorts `samples` (which must not be empty to give meaningful statistics).
    pub fn new(mut samples: Vec<f64>) -> Measured {
        samples.sort_by(f64::total_cmp);
        Measured { samples }
    }

    /// The value at quantile `q` (0..=1) of the samples (nearest rank).
    pub fn quantile(&self, q: f64) -> f64 {
        if self.samples.is_empty() {
            return f64::NAN;
        }
        let i = ((self.samples.len() as f64 * q).ceil() as usize).clamp(1, self.samples.len());
        self.samples[i - 1]
    }

    /// The median.
    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The 99th percentile (for a bandwidth: of the rates, so the fast end).
    pub fn p99(&self) -> f64 {
        self.quantile(0.99)
    }

    /// The 1st percentile (for a bandwidth, the slow end).
    pub fn p1(&self) -> f64 {
        self.quantile(0.01)
    }
}

/// An empty vector for `cap` time stamps whose memory is already written: a timed loop that
/// pushes into it takes no page fault (a first touch costs a microsecond or more, which would
/// land in some samples and not in others).
pub fn stamp_buffer(cap: usize) -> Vec<Instant> {
    let mut v = vec![Instant::now(); cap];
    v.clear();
    v
}

/// Time stamps of consecutive iteration starts → the per-iteration times, divided by `div`.
fn deltas(stamps: &[Instant], div: f64) -> Vec<f64> {
    stamps
        .windows(2)
        .map(|w| (w[1] - w[0]).as_nanos() as f64 / div)
        .collect()
}

/// Iterations a timed loop runs: enough for `budget`, at least `min`, at most `max`.
fn keep_going(start: Instant, done: usize, budget: Duration, min: usize, max: usize) -> bool {
    done < max && (done < min || start.elapsed() < budget)
}

/// [`keep_going`] for a loop that stamps every iteration (`stamps`, each sample the time
/// between two): the budget is judged by the last stamp, not by a reading of its own, so the
/// loop reads the clock once per iteration, as the benchmarks' timed loops do. A second
/// reading would sit inside every sample (about 20 ns here, half of it in a one-way figure
/// taken from a round trip) and make the limit look slower than it is.
fn keep_stamping(
    start: Instant,
    stamps: &[Instant],
    budget: Duration,
    min: usize,
    max: usize,
) -> bool {
    let done = stamps.len();
    done < max
        && (done < min
            || stamps
                .last()
                .is_none_or(|t| t.duration_since(start) < budget))
}

/// One-way latency of a cache line bounced between two spinning threads (two atomics, each
/// written by one thread and spun on by the other): each round trip is timed, and a sample is
/// half of it.
///
/// With `cpus = Some((echo, measuring))` the two threads are pinned there, as the benchmark it
/// is compared with pins its server and client. Never two spinners on one CPU.
pub fn cache_line_one_way(budget: Duration, cpus: Option<(usize, usize)>) -> Measured {
    on_cpu(cpus.map(|c| c.1), || cache_line(budget, cpus.map(|c| c.0)))
}

fn cache_line(budget: Duration, echo_cpu: Option<usize>) -> Measured {
    // Padding keeps the two flags on separate cache lines, so each hand-off moves exactly one
    // line one way, as a doorbell or a CQE written by the peer does.
    #[repr(align(128))]
    struct Line(AtomicU64);
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let (ping, pong, stop) = (ping.clone(), pong.clone(), stop.clone());
        thread::spawn(move || {
            pin(echo_cpu);
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                let v = ping.0.load(Ordering::Acquire);
                if v != seen {
                    seen = v;
                    pong.0.store(v, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    // Warm up (the echo thread's start-up), then time each round trip.
    let mut n = 0u64;
    let round = |n: &mut u64| {
        *n += 1;
        ping.0.store(*n, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != *n {
            std::hint::spin_loop();
        }
    };
    for _ in 0..1000 {
        round(&mut n);
    }
    const MAX: usize = 1 << 20;
    let mut stamps = stamp_buffer(MAX + 1);
    let start = Instant::now();
    while keep_stamping(start, &stamps, budget, 1000, MAX) {
        stamps.push(Instant::now());
        round(&mut n);
    }
    stamps.push(Instant::now());
    stop.store(true, Ordering::Relaxed);
    // The echo thread may be waiting for a value that will never come; one more store lets it
    // see `stop` promptly.
    ping.0.store(n + 1, Ordering::Release);
    let _ = echo.join();
    Measured::new(deltas(&stamps, 2.0))
}

/// One-way latency of a futex wake between two threads (`thread::park` / `unpark`, a futex on
/// Linux and WaitOnAddress on Windows): each round trip, in which each side sleeps until the
/// other wakes it, is timed, and a sample is half of it.
///
/// `cpus` pins as for the cache line. On a virtual machine a wake-up that crosses CPUs costs an
/// inter-processor interrupt to a halted vCPU; with both threads on one CPU
/// ([`futex_wake_same_cpu`]) it is a context switch.
pub fn futex_wake_one_way(budget: Duration, cpus: Option<(usize, usize)>) -> Measured {
    futex_wake_counted(budget, cpus).0
}

/// [`futex_wake_one_way`] and the process's context switches per wake over the same timed
/// loop (counted as the benchmarks count theirs, `ctx_switches`): one by construction, the
/// sleeping side's switch away, as each wake finds its thread asleep.
pub fn futex_wake_counted(
    budget: Duration,
    cpus: Option<(usize, usize)>,
) -> (Measured, Option<f64>) {
    on_cpu(cpus.map(|c| c.1), || futex_wake(budget, cpus.map(|c| c.0)))
}

/// [`futex_wake_one_way`] with both threads pinned to `cpu`: the hand-off is a context switch.
pub fn futex_wake_same_cpu(budget: Duration, cpu: usize) -> Measured {
    futex_wake_one_way(budget, Some((cpu, cpu)))
}

fn futex_wake(budget: Duration, echo_cpu: Option<usize>) -> (Measured, Option<f64>) {
    let turn = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let main = thread::current();
    let echo = {
        let (turn, stop) = (turn.clone(), stop.clone());
        thread::spawn(move || {
            pin(echo_cpu);
            let mut seen = 0;
            loop {
                let v = turn.load(Ordering::Acquire);
                if stop.load(Ordering::Acquire) {
                    break;
                }
                if v != seen && v % 2 == 1 {
                    seen = v;
                    turn.store(v + 1, Ordering::Release);
                    main.unpark();
                } else {
                    thread::park();
                }
            }
        })
    };
    let echo_thread = echo.thread().clone();
    let mut n = 0u64;
    let round = |n: &mut u64| {
        *n += 2;
        turn.store(*n - 1, Ordering::Release);
        echo_thread.unpark();
        while turn.load(Ordering::Acquire) != *n {
            thread::park();
        }
    };
    for _ in 0..50 {
        round(&mut n);
    }
    const MAX: usize = 1 << 17;
    let mut stamps = stamp_buffer(MAX + 1);
    let switches = crate::ctx_switches::Switches::now();
    let start = Instant::now();
    while keep_stamping(start, &stamps, budget, 200, MAX) {
        stamps.push(Instant::now());
        round(&mut n);
    }
    stamps.push(Instant::now());
    // Two wakes per round trip.
    let wakes = 2 * (stamps.len() - 1);
    let per_wake = switches
        .and_then(|b| crate::ctx_switches::Switches::now().map(|a| a.since(&b)))
        .map(|n| n as f64 / wakes as f64);
    stop.store(true, Ordering::Release);
    echo_thread.unpark();
    let _ = echo.join();
    (Measured::new(deltas(&stamps, 2.0)), per_wake)
}

/// One read of the clock the limits and the benchmarks time with (`Instant::now`), timed as
/// every per-iteration sample is: the time between consecutive readings, here with nothing
/// between them. It is the part of every per-iteration sample that is the clock's.
pub fn clock_read(budget: Duration) -> Measured {
    const MAX: usize = 1 << 20;
    let mut stamps = stamp_buffer(MAX);
    let start = Instant::now();
    // A sample is the gap between two stamps: 1001 stamps give the 1000 samples promised
    // however little of the budget the thread got.
    while keep_stamping(start, &stamps, budget, 1001, MAX) {
        stamps.push(Instant::now());
    }
    Measured::new(deltas(&stamps, 1.0))
}

/// Pairs in one mutex sample.
pub const MUTEX_BATCH: u32 = 64;

/// An uncontended `std::sync::Mutex` lock + unlock, in nanoseconds, each sample the mean of a
/// batch of [`MUTEX_BATCH`]: one pair takes less than the clock's step and than one clock read
/// (see the module's notes), so it cannot be timed alone.
pub fn mutex_lock_unlock(budget: Duration) -> Measured {
    let m = std::sync::Mutex::new(0u64);
    const PER: u32 = MUTEX_BATCH;
    let mut samples = Vec::new();
    let start = Instant::now();
    while keep_going(start, samples.len(), budget, 200, 1_000_000) {
        let t = Instant::now();
        for _ in 0..PER {
            *black_box(&m).lock().unwrap_or_else(|e| e.into_inner()) += 1;
        }
        samples.push(t.elapsed().as_nanos() as f64 / f64::from(PER));
    }
    Measured::new(samples)
}

/// `memcpy` between two `size`-byte buffers: each sample is the rate (bytes per second) of
/// one copy, or for sizes below 64 KiB of a group of copies of 64 KiB in all (at most 4096
/// copies), so that the two clock reads around a sample stay small beside it.
///
/// Source and destination sit half a page apart modulo 4096, as the benchmarks' buffers do:
/// where two separately allocated buffers land is up to the allocator, and a distance that is
/// (nearly) a multiple of 4096 slows a copy several times on these CPUs (4K aliasing, and
/// `rep movsb` on AMD), which would make the floor depend on heap layout.
pub fn memcpy_rate(size: usize, budget: Duration) -> Measured {
    let stride = size.max(1).next_multiple_of(4096) + 2048;
    let mut both = vec![0x5au8; stride + size];
    let (src, rest) = both.split_at_mut(stride);
    let src = &src[..size];
    let dst = &mut rest[..size];
    let per = ((64 << 10) / size.max(1)).clamp(1, 4096);
    for _ in 0..16 {
        dst.copy_from_slice(black_box(src));
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while keep_going(start, samples.len(), budget, 30, 200_000) {
        let t = Instant::now();
        for _ in 0..per {
            dst.copy_from_slice(black_box(src));
            black_box(&mut *dst);
        }
        let ns = t.elapsed().as_nanos().max(1) as f64;
        samples.push((per * size) as f64 * 1e9 / ns);
    }
    Measured::new(samples)
}

/// A TCP loopback connection: connect + accept + close of both ends, in nanoseconds each. The
/// listener runs on this thread (accept follows connect at once), so this is the kernel's cost
/// of a connection without any wire.
pub fn tcp_loopback_connect(budget: Duration) -> Measured {
    let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", 0)) else {
        return Measured::default();
    };
    let Ok(addr) = listener.local_addr() else {
        return Measured::default();
    };
    let mut samples = Vec::new();
    let start = Instant::now();
    while keep_going(start, samples.len(), budget, 50, 20_000) {
        let t = Instant::now();
        let Ok(client) = std::net::TcpStream::connect(addr) else {
            break;
        };
        let Ok((server, _)) = listener.accept() else {
            break;
        };
        drop(client);
        drop(server);
        samples.push(t.elapsed().as_nanos() as f64);
    }
    Measured::new(samples)
}

/// Slots of the [`spsc_ring_rate`] ring: perftest's send queue depth for bandwidth tests.
pub const RING_SLOTS: usize = 128;
/// Messages in one [`spsc_ring_rate`] sample: one message is tens of nanoseconds, below the
/// clock's step, so a sample is the rate over a batch.
pub const RING_BATCH: usize = 4096;

/// The message rate of a single-producer/single-consumer ring of 64-byte slots between two
/// threads, in messages per second (each sample the rate over [`RING_BATCH`] messages): the
/// floor of any queue that hands small messages from one CPU to another, as a send queue and a
/// receive queue between two sides do.
///
/// The producer writes each message's 64 bytes into the next free slot and publishes it with
/// one release store of its head index; the consumer reads the 64 bytes and frees the slot
/// with a release store of its tail index. Each side keeps its own copy of the other's index
/// and re-reads it only when the ring looks full (or empty), as any tuned SPSC ring does, so a
/// cache line moves between the CPUs per slot written and per index re-read, not per access.
///
/// `cpus = Some((receiver, sender))`: the consumer is pinned as send_bw's server (the receiving
/// side), the producer as its client.
pub fn spsc_ring_rate(budget: Duration, cpus: Option<(usize, usize)>) -> Measured {
    // A slot is one cache line; its bytes are eight relaxed words, so the copy needs no
    // `unsafe` and compiles to plain stores and loads.
    #[repr(align(64))]
    struct Slot([AtomicU64; 8]);
    #[repr(align(128))]
    struct Index(AtomicU64);
    let slots: Vec<Slot> = (0..RING_SLOTS)
        .map(|_| Slot(std::array::from_fn(|_| AtomicU64::new(0))))
        .collect();
    let (head, tail) = (Index(AtomicU64::new(0)), Index(AtomicU64::new(0)));
    let stop = AtomicBool::new(false);
    let n = RING_SLOTS as u64;
    thread::scope(|s| {
        s.spawn(|| {
            pin(cpus.map(|c| c.1));
            let (mut next, mut seen_tail) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                if next - seen_tail == n {
                    seen_tail = tail.0.load(Ordering::Acquire);
                    if next - seen_tail == n {
                        std::hint::spin_loop();
                        continue;
                    }
                }
                for (k, w) in slots[(next % n) as usize].0.iter().enumerate() {
                    w.store(next ^ k as u64, Ordering::Relaxed);
                }
                next += 1;
                head.0.store(next, Ordering::Release);
            }
        });
        let consumer = s.spawn(|| {
            pin(cpus.map(|c| c.0));
            let (mut next, mut seen_head, mut sum) = (0u64, 0u64, 0u64);
            let mut take = |count: usize| {
                let mut got = 0;
                while got < count {
                    if next == seen_head {
                        seen_head = head.0.load(Ordering::Acquire);
                        if next == seen_head {
                            std::hint::spin_loop();
                            continue;
                        }
                    }
                    for w in &slots[(next % n) as usize].0 {
                        sum = sum.wrapping_add(w.load(Ordering::Relaxed));
                    }
                    next += 1;
                    tail.0.store(next, Ordering::Release);
                    got += 1;
                }
            };
            // Warm up: both threads running, the slots in cache.
            take(RING_BATCH);
            let mut samples = Vec::new();
            let start = Instant::now();
            while keep_going(start, samples.len(), budget, 30, 1_000_000) {
                let t = Instant::now();
                take(RING_BATCH);
                samples.push(RING_BATCH as f64 * 1e9 / t.elapsed().as_nanos().max(1) as f64);
            }
            stop.store(true, Ordering::Relaxed);
            black_box(sum);
            samples
        });
        Measured::new(consumer.join().unwrap_or_default())
    })
}

/// Runs `measure` on a thread pinned to `cpu` (or on this thread when `None`).
fn on_cpu<R: Send>(cpu: Option<usize>, measure: impl FnOnce() -> R + Send) -> R {
    match cpu {
        None => measure(),
        Some(cpu) => thread::scope(|s| {
            s.spawn(move || {
                pin(Some(cpu));
                measure()
            })
            .join()
            .expect("baseline thread")
        }),
    }
}

/// Pins the calling thread when asked; the caller checked beforehand that pinning works
/// ([`can_pin`]), so a refusal here only leaves the thread unpinned.
fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        let _ = crate::perftest::pin_to(cpu);
    }
}

/// Whether threads can be pinned to `cpus` on this machine.
pub fn can_pin(cpus: (usize, usize)) -> bool {
    let try_pin = |cpu| {
        thread::scope(|s| {
            s.spawn(|| crate::perftest::pin_to(cpu).is_ok())
                .join()
                .unwrap_or(false)
        })
    };
    try_pin(cpus.0) && try_pin(cpus.1)
}

/// The two CPUs the benchmarks pin their server/echo and client/measuring threads to, when the
/// machine has two and lets us pin; `None` otherwise (then nothing spins on a shared CPU
/// knowingly, but the scheduler decides).
pub fn bench_cpus() -> Option<(usize, usize)> {
    (thread::available_parallelism().map_or(1, |n| n.get()) >= 2)
        .then_some((1, 0))
        .filter(|&cpus| can_pin(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Only shapes here: performance never fails a unit test.
    #[test]
    fn a_stamping_loop_judges_its_budget_by_its_last_stamp() {
        let start = Instant::now();
        let budget = Duration::from_millis(5);
        let early = vec![start, start + Duration::from_millis(1)];
        let late = vec![start, start + Duration::from_millis(6)];
        assert!(keep_stamping(start, &[], budget, 0, 10));
        assert!(keep_stamping(start, &early, budget, 0, 10));
        assert!(!keep_stamping(start, &late, budget, 0, 10));
        // However late, not before `min` samples; never past `max`.
        assert!(keep_stamping(start, &late, budget, 3, 10));
        assert!(!keep_stamping(start, &early, budget, 0, 2));
        // Judged by the stamps, not by the clock: once the budget has passed in real time,
        // a loop whose last stamp is early still goes on.
        std::thread::sleep(budget + Duration::from_millis(1));
        assert!(keep_stamping(start, &early, budget, 0, 10));
    }

    #[test]
    fn limits_return_positive_finite_numbers() {
        let d = Duration::from_millis(10);
        for m in [
            cache_line_one_way(d, None),
            futex_wake_one_way(d, None),
            mutex_lock_unlock(d),
            memcpy_rate(1 << 16, d),
            memcpy_rate(2, d),
            spsc_ring_rate(d, None),
        ] {
            assert!(!m.samples.is_empty());
            let (med, p99) = (m.median(), m.p99());
            assert!(med.is_finite() && med > 0.0 && p99 >= med, "{med} {p99}");
        }
    }

    #[test]
    fn the_clock_and_the_futex_counts_have_their_shapes() {
        let d = Duration::from_millis(10);
        let clock = clock_read(d);
        assert!(clock.samples.len() >= 1000 && clock.median() >= 0.0);
        let (wake, per_wake) = futex_wake_counted(d, None);
        assert!(!wake.samples.is_empty());
        if std::path::Path::new("/proc/self/task").exists() {
            assert!(
                per_wake.is_some_and(|s| s.is_finite() && s >= 0.0),
                "{per_wake:?}"
            );
        }
    }

    #[test]
    fn the_clock_gives_a_thousand_samples_even_with_no_time_left() {
        assert!(clock_read(Duration::ZERO).samples.len() >= 1000);
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let m = Measured::new((1..=100).rev().map(f64::from).collect());
        assert_eq!(m.median(), 50.0);
        assert_eq!(m.p99(), 99.0);
        assert_eq!(m.p1(), 1.0);
        assert!(Measured::default().median().is_nan());
    }
}
