//! `send_lat` and `send_bw`: perftest's `run_iter_lat_send` and `run_iter_bw` /
//! `run_iter_bw_server` over send/receive.

use wv_client::raw::RawFile;
use wv_client::verbs::{WorkCompletion, WrOpcode};

use super::endpoint::{DataPath, LatLog, Role, STOPPED, Side, Step, Window, poll_batch, poll_some};
use super::{Params, Samples, bw_client, cqe_poll};

/// Posts the receives a size needs up front (at most the receive depth) and returns how many.
fn prepost<D: DataPath>(side: &D, p: &Params, total: u64) -> Result<u64, String> {
    let n = total.min(u64::from(p.rx_depth));
    for i in 0..n {
        side.post_recv(i)?;
    }
    Ok(n)
}

/// Ping-pong of sends: the client sends first; each side waits for a receive, re-posts a
/// receive while more are needed, then sends. Every send is signalled (the latency tests' TX
/// depth of 1 caps CQ moderation at 1) and its completion reaped. The client timestamps each
/// post; a sample is the time between two posts, i.e. one round trip.
///
/// Generic over the data path, so the filter-overhead baseline runs this same loop on the
/// soft HCA without the driver.
pub fn lat<D: DataPath>(step: Step<'_, D>) -> Result<Samples, String> {
    let (side, role, p, run, sh) = step.parts();
    let (duration, iters) = Window::for_run(p, run);
    // Duration runs keep `rx_depth` receives posted and re-post every one.
    let mut posted_recvs = prepost(side, p, iters)?;
    sh.sync.meet(&sh.abort)?;
    let mut wc = [WorkCompletion::default(); 1];
    let mut log = LatLog::new(duration, iters);
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    while scnt < iters || rcnt < iters {
        if rcnt < iters && !(scnt < 1 && role == Role::Client) {
            match poll_some(side.recv_cq(), &mut wc, p.events, sh, run.ix) {
                Ok(_) => {}
                Err(e) if e == STOPPED => break,
                Err(e) => return Err(e),
            }
            rcnt += 1;
            if posted_recvs < iters {
                side.post_recv(posted_recvs)?;
                posted_recvs += 1;
            }
            if !log.tick(role, rcnt) {
                break;
            }
        }
        if scnt < iters {
            log.stamp(role, sh);
            scnt += 1;
            let signaled = scnt % u64::from(p.cq_mod) == 0 || scnt == iters;
            side.post(scnt, WrOpcode::Send, run.size, signaled)?;
            if signaled {
                poll_some(side.send_cq(), &mut wc, p.events, sh, run.ix)?;
            }
        }
    }
    Ok(log.samples())
}

/// Send bandwidth: the client streams sends, keeping TX depth outstanding with CQ moderation;
/// the server keeps receives posted and reaps them.
pub fn bw<F: RawFile + Send + Sync + 'static>(step: Step<'_, Side<F>>) -> Result<Samples, String> {
    let (side, role, p, run, sh) = step.parts();
    match role {
        Role::Client => {
            sh.sync.meet(&sh.abort)?;
            bw_client(side, p, run, sh, WrOpcode::Send)
        }
        Role::Server => {
            let total = if p.duration.is_some() {
                u64::MAX
            } else {
                run.iters
            };
            let mut posted_recvs = prepost(side, p, total)?;
            sh.sync.meet(&sh.abort)?;
            let mut wc = vec![WorkCompletion::default(); usize::from(cqe_poll::DYNAMIC_MAX)];
            let mut batch = cqe_poll::CqePoll::new(p, run.iters, &side.dynamic_poll);
            let mut rcnt = 0u64;
            while rcnt < total {
                let polled = poll_batch(
                    &*side.recv_cq,
                    &mut wc,
                    Some((&mut batch, rcnt)),
                    p.events,
                    sh,
                    run.ix,
                );
                let n = match polled {
                    Ok(n) => n as u64,
                    Err(e) if e == STOPPED => break,
                    Err(e) => return Err(e),
                };
                rcnt += n;
                for _ in 0..n {
                    if posted_recvs < total {
                        side.post_recv(posted_recvs)?;
                        posted_recvs += 1;
                    }
                }
            }
            Ok(Samples::default())
        }
    }
}
