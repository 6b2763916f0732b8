//! `read_lat` and `read_bw`: perftest's `run_iter_lat` and `run_iter_bw` over RDMA read. Only
//! the client works; the server's memory is read without its CPU.

use wv_client::raw::RawFile;
use wv_client::verbs::{WorkCompletion, WrOpcode};

use super::Samples;
use super::endpoint::{DataPath, LatLog, Role, Side, Step, Window, poll_some};

/// One signalled read at a time: post, then poll (or sleep on the CQ event with `-e`) for its
/// completion; a sample is the time between two posts, i.e. one whole read.
pub fn lat<F: RawFile + Send + Sync + 'static>(step: Step<'_, Side<F>>) -> Result<Samples, String> {
    let (side, role, p, run, sh) = step.parts();
    sh.sync.meet(&sh.abort)?;
    if role == Role::Server {
        return Ok(Samples::default());
    }
    let (window, iters) = Window::for_run(p, run);
    let mut wc = [WorkCompletion::default(); 1];
    let mut log = LatLog::new(window, iters);
    let mut scnt = 0u64;
    while scnt < iters {
        log.stamp(role, sh);
        scnt += 1;
        side.post(scnt, WrOpcode::RdmaRead, run.size, true)?;
        poll_some(&*side.send_cq, &mut wc, p.events, sh, usize::MAX)?;
        if !log.tick(role, scnt) {
            break;
        }
    }
    Ok(log.samples())
}
