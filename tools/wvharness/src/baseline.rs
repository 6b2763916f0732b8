//! Baselines measured in the same run as the benchmarks they calibrate.
//!
//! The machines this runs on are shared and small (2 cores), so absolute times drift from run
//! to run by more than the differences worth reporting. Each benchmark number is therefore
//! printed as a ratio to what the same machine does, at the same moment, with the cheapest
//! mechanism that could possibly do the job: a cache line bounced between two threads (the floor
//! of any polling hand-off), a futex wake round trip (the floor of any sleeping hand-off), and
//! `memcpy` (the floor of moving bytes).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Median of per-batch means, so a context switch in one batch (likely on 2 shared cores) does
/// not move the result, in nanoseconds per operation.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One-way latency of a cache line bounced between two spinning threads (two atomics, each
/// written by one thread and spun on by the other), in nanoseconds: half the round trip.
///
/// With `cpus = Some((echo, measuring))` the two threads are pinned there, as the benchmark it
/// is compared with pins its server and client.
pub fn cache_line_one_way_ns(budget: Duration, cpus: Option<(usize, usize)>) -> f64 {
    on_cpu(cpus.map(|c| c.1), || cache_line(budget, cpus.map(|c| c.0)))
}

fn cache_line(budget: Duration, echo_cpu: Option<usize>) -> f64 {
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
    const BATCH: u64 = 2_000;
    let mut batches = Vec::new();
    let mut n = 0u64;
    let start = Instant::now();
    while start.elapsed() < budget || batches.len() < 5 {
        let t = Instant::now();
        for _ in 0..BATCH {
            n += 1;
            ping.0.store(n, Ordering::Release);
            while pong.0.load(Ordering::Acquire) != n {
                std::hint::spin_loop();
            }
        }
        batches.push(t.elapsed().as_nanos() as f64 / BATCH as f64 / 2.0);
    }
    stop.store(true, Ordering::Relaxed);
    // The echo thread may be waiting for a value that will never come; one more store lets it
    // see `stop` promptly.
    ping.0.store(n + 1, Ordering::Release);
    let _ = echo.join();
    // Skip the first batch: it includes the other thread's start-up.
    median(batches.split_off(1))
}

/// One-way latency of a futex wake between two threads (`thread::park` / `unpark`, which is a
/// futex on Linux and a keyed event / WaitOnAddress on Windows), in nanoseconds: half of a
/// round trip in which each side sleeps until the other wakes it.
///
/// Pinning matters most here: on a virtual machine a wake-up that crosses CPUs costs an
/// inter-processor interrupt to a halted vCPU (tens of microseconds), one on the same CPU a
/// context switch (about a microsecond). `cpus` pins as for the cache-line baseline.
pub fn futex_wake_one_way_ns(budget: Duration, cpus: Option<(usize, usize)>) -> f64 {
    on_cpu(cpus.map(|c| c.1), || futex_wake(budget, cpus.map(|c| c.0)))
}

fn futex_wake(budget: Duration, echo_cpu: Option<usize>) -> f64 {
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
    const BATCH: u64 = 200;
    let mut batches = Vec::new();
    let mut n = 0u64;
    let start = Instant::now();
    while start.elapsed() < budget || batches.len() < 5 {
        let t = Instant::now();
        for _ in 0..BATCH {
            n += 2;
            turn.store(n - 1, Ordering::Release);
            echo_thread.unpark();
            while turn.load(Ordering::Acquire) != n {
                thread::park();
            }
        }
        batches.push(t.elapsed().as_nanos() as f64 / BATCH as f64 / 2.0);
    }
    stop.store(true, Ordering::Release);
    echo_thread.unpark();
    let _ = echo.join();
    median(batches.split_off(1))
}

/// Runs `measure` on a thread pinned to `cpu` (or on this thread when `None`).
fn on_cpu(cpu: Option<usize>, measure: impl FnOnce() -> f64 + Send) -> f64 {
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

/// `memcpy` bandwidth between two `size`-byte buffers, in bytes per second (the best of a few
/// batches: the copy has no dependency on another thread, so the best batch is the one the
/// scheduler left alone).
pub fn memcpy_bytes_per_sec(size: usize, budget: Duration) -> f64 {
    let src = vec![0x5au8; size];
    let mut dst = vec![0u8; size];
    // Enough copies per batch to dwarf the clock reads, few enough for several batches.
    let per_batch = ((64usize << 20) / size.max(1)).clamp(8, 4096);
    let mut best = 0f64;
    let start = Instant::now();
    let mut batches = 0;
    while start.elapsed() < budget || batches < 3 {
        let t = Instant::now();
        for _ in 0..per_batch {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        }
        let rate = (per_batch * size) as f64 / t.elapsed().as_secs_f64();
        best = best.max(rate);
        batches += 1;
    }
    best
}

/// One TCP connection over loopback, in nanoseconds: `connect`, `accept` and both closes,
/// the median of single iterations (the kernel completes the handshake inside `connect`, so
/// one thread does both sides). What a connection costs where no RDMA is involved.
///
/// # Errors
/// The socket calls' error (no loopback interface, no free port).
pub fn tcp_connect_accept_close_ns(budget: Duration) -> std::io::Result<f64> {
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let addr = listener.local_addr()?;
    let mut times = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || times.len() < 20 {
        let t = Instant::now();
        let client = TcpStream::connect(addr)?;
        let (server, _) = listener.accept()?;
        drop(client);
        drop(server);
        times.push(t.elapsed().as_nanos() as f64);
        if times.len() >= 100_000 {
            break;
        }
    }
    Ok(median(times))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Only shapes here: performance never fails a unit test.
    #[test]
    fn baselines_return_positive_finite_numbers() {
        let d = Duration::from_millis(20);
        for v in [
            cache_line_one_way_ns(d, None),
            futex_wake_one_way_ns(d, None),
            memcpy_bytes_per_sec(1 << 16, d),
            tcp_connect_accept_close_ns(d).unwrap(),
        ] {
            assert!(v.is_finite() && v > 0.0, "{v}");
        }
    }
}
