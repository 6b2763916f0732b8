//! The device engine: executes send-queue WQEs in the doorbell caller's thread, carries each
//! message to the target QP's responder as packets of the path MTU with one PSN each, moves
//! the bytes between registered regions, and writes the completions. Like rxe, no device
//! thread: the work runs where the doorbell was rung, or in the DPC of the QP's timer.
//!
//! Split by role, as rxe splits `rxe_req.c`, `rxe_resp.c` and `rxe_comp.c`:
//! * [`requester`] walks the send queue: local operations, UC/UD messages, RC (re)sends
//!   bounded by `max_rd_atomic` and fences, the peer it sends to;
//! * [`responder`] takes a burst of packets at the receiving QP: sequence checks, receive
//!   WQEs, remote access checks, reads, atomics and the resources that answer duplicates,
//!   receive completions;
//! * [`completer`] acts on the answers: cumulative ACKs, read and atomic responses, NAKs,
//!   retries and the QP's timer, send completions and the flush of the send queue;
//! * [`wire`] is what travels between them (the message, the link's fate for its packets,
//!   the answer), [`segments`] the scatter/gather lists both sides copy through.
//!
//! The RC transport follows IBTA vol. 1 ch. 9:
//! * every packet gets an answer from the link: an ACK (cumulative), a read or atomic
//!   response, an RNR NAK, a sequence-error NAK, a fatal NAK, or nothing (the packet or the
//!   answer was lost);
//! * after a loss the requester keeps sending what follows (up to `max_rd_atomic` reads and
//!   atomics in flight, fences and local operations waiting for what precedes them); the
//!   responder answers the first out-of-sequence packet with a sequence-error NAK and the
//!   requester goes back to the lost packet at once; with nothing following, the local ACK
//!   timer (4.096 µs × 2^`timeout`) expires and it goes back to the oldest unacknowledged
//!   packet; `retry_cnt` such retries, then `RETRY_EXC_ERR`;
//! * an RNR NAK makes it wait the responder's `min_rnr_timer` before resending; `rnr_retry`
//!   such waits (7: for ever), then `RNR_RETRY_EXC_ERR`;
//! * a duplicate request is acknowledged again; a duplicate read is executed again; a
//!   duplicate atomic gets the original value it got the first time from the responder's
//!   resources, and is never executed twice.
//!
//! Timers run on the platform's clock (`Bus::now_ns`, `Bus::set_timer`), so the host's
//! deterministic mode fires them exactly when a test moves its clock.
//!
//! UC and UD have no acknowledgements: a message is complete when its packets are sent. A
//! send error moves them to SQE (the send queue flushes, the receive queue goes on); a
//! responder error drops the message silently (rxe's classes D and E), except a receive WQE
//! that names memory it may not use, which is the QP's own error (class A).
//!
//! Lock order: `Qp::attrs` → `Qp::sq_ctx` → `Qp::resp` → `Srq::consumer` → `Cq` producer
//! lock. The responder of another QP is entered with only the requester's `sq_ctx` held, and a
//! responder never takes an `sq_ctx` (it only *schedules* send-queue work through [`run_sq`],
//! which uses `try_lock`), so two QPs sending to each other cannot deadlock.

mod completer;
mod requester;
mod responder;
mod segments;
mod wire;

pub(crate) use requester::{Target, UdDest, opcode_valid, run_sq};
pub(crate) use responder::{InMsg, RdRes, flush_rq};

/// Largest inline payload a WQE carries.
pub const MAX_INLINE: usize = 256;
/// Bytes of the GRH that precede a UD payload in the receive buffer.
pub const GRH_BYTES: usize = 40;
/// PSNs are 24 bits wide.
const PSN_MASK: u32 = 0xFF_FFFF;

/// How far PSN `a` is after `b` (negative: before), modulo 2^24.
fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// The PSN `n` after `a`.
fn psn_add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}
