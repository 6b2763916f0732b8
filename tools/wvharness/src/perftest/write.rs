//! `write_lat` and `write_bw`: perftest's `run_iter_lat_write` and `run_iter_bw` over RDMA
//! write.

use std::sync::atomic::Ordering;

use wv_client::raw::RawFile;
use wv_client::verbs::{WorkCompletion, WrOpcode};

use super::Samples;
use super::endpoint::{DataPath, LatLog, Role, Side, Step, Window, aborted, poll_some};

/// Write ping-pong: each side writes the message into the peer's landing half with the
/// iteration count (as a byte) in its last byte, then busy-waits on the last byte of its own
/// landing half for the peer's answer — memory polling, not CQ polling, as perftest does.
/// Writes are signalled and their completions reaped.
pub fn lat<F: RawFile + Send + Sync + 'static>(step: Step<'_, Side<F>>) -> Result<Samples, String> {
    let (side, role, p, run, sh) = step.parts();
    let (window, iters) = Window::for_run(p, run);
    let poll_off = side.land_off + run.size - 1;
    // A byte left from an earlier size must not pass for the first answer.
    side.buf.write(poll_off, &[0]).map_err(|e| e.to_string())?;
    sh.sync.meet(&sh.abort)?;
    let mut wc = [WorkCompletion::default(); 1];
    let mut log = LatLog::new(window, iters);
    let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
    while scnt < iters || ccnt < iters || rcnt < iters {
        if rcnt < iters && !(scnt < 1 && role == Role::Server) {
            rcnt += 1;
            let mut spins = 0u32;
            while side.buf.byte(poll_off) != Some(rcnt as u8) {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1024) {
                    if sh.abort.load(Ordering::Relaxed) {
                        return Err(aborted());
                    }
                    // The client ended a duration run: no answer will come.
                    if sh.check(run.ix).is_err() {
                        return Ok(Samples::default());
                    }
                }
                std::hint::spin_loop();
            }
            if !log.tick(role, rcnt) {
                break;
            }
        }
        if scnt < iters {
            log.stamp(role, sh);
            scnt += 1;
            side.buf
                .write(run.size - 1, &[scnt as u8])
                .map_err(|e| e.to_string())?;
            side.post(scnt, WrOpcode::RdmaWrite, run.size, true)?;
        }
        if ccnt < iters {
            poll_some(&*side.send_cq, &mut wc, false, sh, usize::MAX)?;
            ccnt += 1;
        }
    }
    Ok(log.samples())
}
