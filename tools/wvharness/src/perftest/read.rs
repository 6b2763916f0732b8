//! `read_lat` and `read_bw`: perftest's `run_iter_lat` and `run_iter_bw` over RDMA read. Only
//! the client works; the server's memory is read without its CPU.

use wv_client::raw::RawFile;
use wv_client::verbs::{WorkCompletion, WrOpcode};

use super::endpoint::{Role, Run, Shared, Side, Window, poll_some};
use super::{Params, Samples};

/// One signalled read at a time: post, then poll (or sleep on the CQ event with `-e`) for its
/// completion; a sample is the time between two posts, i.e. one whole read.
pub fn lat<F: RawFile + Send + Sync + 'static>(
    side: &Side<F>,
    role: Role,
    p: &Params,
    run: Run,
    sh: &Shared,
) -> Result<Samples, String> {
    sh.sync.meet(&sh.abort)?;
    if role == Role::Server {
        return Ok(Samples::default());
    }
    let mut window = p.duration.map(Window::new);
    let iters = if window.is_some() {
        u64::MAX
    } else {
        run.iters
    };
    let mut wc = [WorkCompletion::default(); 1];
    let mut posted = Vec::with_capacity(if window.is_some() { 0 } else { iters as usize });
    let mut scnt = 0u64;
    while scnt < iters {
        if window.is_none() {
            posted.push(sh.now());
        }
        scnt += 1;
        side.post(scnt, WrOpcode::RdmaRead, 0, run.size, true)?;
        poll_some(&*side.send_cq, &mut wc, p.events, sh, usize::MAX)?;
        if let Some(w) = &mut window
            && !w.tick(scnt)
        {
            break;
        }
    }
    Ok(Samples {
        posted,
        completed: Vec::new(),
        window: window.and_then(|w| w.result()),
        switches: None,
    })
}
