//! The link: ordered and lossless by default; seeded fault injection exercises RC retry (NAK-
//! and timer-driven, on the deterministic clock), duplicate detection by PSN, and the
//! retry-exceeded path.

use crate::common::*;
use wv_hal::*;
use wv_softhca::*;

/// Faults that only drop packets, `drop_ppm` of them.
fn drops(seed: u64, drop_ppm: u32) -> Option<FaultConfig> {
    Some(FaultConfig {
        seed,
        drop_ppm,
        ..FaultConfig::default()
    })
}

fn run_traffic(
    seed: u64,
    cfg: FaultConfig,
    n: u64,
) -> (LinkStats, Vec<WorkCompletion>, Vec<WorkCompletion>, Vec<u8>) {
    let (p, f, a, b) = deterministic_pair();
    let (ca, cb, qa, qb) = deep_rc_qps(&a, &b, 1024, 256);
    let (m, rb) = mems(&a, 4096, &b, 8192);
    f.set_faults(Some(FaultConfig { seed, ..cfg }));
    let mut sw = Vec::new();
    let mut rw = Vec::new();
    for i in 0..n {
        m.buf.write(0, &i.to_le_bytes()).unwrap();
        post_recv(&qb, i, rb.sge(i as usize * 8 % 4096, 8));
        // A send, and an RDMA write with immediate that must land exactly once.
        post_send(&qa, i, m.sge(0, 8));
        qb.uvp.post_recv(&recv_wr(1000 + i, &[])).unwrap();
        let sg = [m.sge(0, 8)];
        let mut wr = send_wr(1000 + i, WrOpcode::RdmaWriteWithImm, &sg);
        wr.remote_addr = rb.addr(4096 + (i as usize * 8 % 4096));
        wr.rkey = rb.rkey;
        wr.imm_or_inv = i as u32;
        qa.uvp.post_send(&wr).unwrap();
        // A loss nothing follows is found by the local ACK timer: let it run.
        run_timers(&p, 1000);
        sw.extend(poll_all(&ca));
        rw.extend(poll_all(&cb));
    }
    assert_eq!(p.pending_timers(), 0);
    settle(&p);
    (f.stats(), sw, rw, rb.buf.to_vec())
}

#[test]
fn lossless_by_default() {
    let (stats, sw, rw, _) = run_traffic(1, FaultConfig::default(), 50);
    assert_eq!((stats.dropped, stats.corrupted, stats.delayed), (0, 0, 0));
    assert_eq!(stats.delivered, 100);
    assert_eq!(sw.len(), 100);
    assert_eq!(rw.len(), 100);
}

#[test]
fn drops_corruption_and_delays_are_retried_and_duplicates_ignored() {
    let cfg = FaultConfig {
        seed: 0,
        drop_ppm: 100_000,
        corrupt_ppm: 100_000,
        delay_ppm: 100_000,
    };
    let (stats, sw, rw, mem) = run_traffic(42, cfg, 200);
    assert!(
        stats.dropped > 0 && stats.corrupted > 0 && stats.delayed > 0,
        "{stats:?}"
    );
    // Every request completed successfully, in order, exactly once.
    assert!(
        sw.iter().all(|w| w.status == WcStatus::Success),
        "{:?}",
        sw.iter().find(|w| w.status != WcStatus::Success)
    );
    let ids = wr_ids(&sw);
    let want: Vec<u64> = (0..200).flat_map(|i| [i, 1000 + i]).collect();
    assert_eq!(ids, want);
    // The responder consumed each receive exactly once, with the right data.
    let rids = wr_ids(&rw);
    assert_eq!(rids, want);
    for w in rw.iter().filter(|w| w.opcode == WcOpcode::RecvRdmaWithImm) {
        assert_eq!(u64::from(w.imm_data), w.wr_id - 1000);
    }
    // Every RDMA write landed in its own slot.
    for i in 0..200usize {
        let at = 4096 + i * 8;
        assert_eq!(
            u64::from_le_bytes(mem[at..at + 8].try_into().unwrap()),
            i as u64
        );
    }
    // The same seed gives the same run.
    let (again, _, _, _) = run_traffic(42, cfg, 200);
    assert_eq!(again, stats);
}

#[test]
fn a_dead_link_exceeds_the_retry_count() {
    let (p, f, a, b, ca, _cb, qa, _qb) =
        deterministic_connected(QpType::Rc, 16, Conn::with_retry(3));
    f.set_faults(drops(7, 1_000_000));
    let m = a.mem(16, ALL_ACCESS);
    post_send(&qa, 1, m.sge(0, 8));
    assert_eq!(run_timers(&p, 100), 4);
    assert_eq!(poll_all(&ca)[0].status, WcStatus::RetryExcErr);
    // The first try plus three retries.
    assert_eq!(f.stats().dropped, 4);
    // UD under loss just loses datagrams; the sender never sees an error.
    f.set_faults(None);
    let (cu, cv, u, v) = ud_qps(&a, &b, 16);
    f.set_faults(drops(9, 500_000));
    let rb = b.mem(64, ALL_ACCESS);
    let mut wr = send_wr(1, WrOpcode::Send, &[]);
    let d = [1u8; 4];
    wr.inline_data = Some(&d);
    wr.ud = Some(ud_to(b.hca.gid(), v.uvp.qpn()));
    for i in 0..10 {
        post_recv(&v, i, rb.sge(0, 64));
        u.uvp.post_send(&wr).unwrap();
    }
    assert!(poll_all(&cu).iter().all(|w| w.status == WcStatus::Success));
    let got = poll_all(&cv).len();
    assert!(got < 10);
    settle(&p);
}

#[test]
fn a_message_resent_from_its_middle_lands_in_the_receives_later_pieces() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (src, dst) = mems(&a, 6_000, &b, 8_000);
    f.set_faults(drops(7, 200_000));
    for i in 0..20u8 {
        let data = write_pattern(&src, 6_000, |j| (j % 251) as u8 ^ i);
        dst.buf.write(0, &[0; 8_000]).unwrap();
        // Two pieces: every packet after the first few lands in the second.
        let rs = [dst.sge(0, 1_000), dst.sge(2_000, 5_000)];
        qb.uvp.post_recv(&recv_wr(u64::from(i), &rs)).unwrap();
        post_send(&qa, u64::from(i), src.sge(0, 6_000));
        run_timers(&p, 1000);
        let r = poll_all(&cb);
        assert_eq!(r.len(), 1, "message {i}");
        assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 6_000));
        assert_eq!(poll_all(&ca).len(), 1);
        let d = dst.buf.to_vec();
        assert_eq!(&d[..1_000], &data[..1_000], "message {i}");
        assert_eq!(&d[2_000..7_000], &data[1_000..], "message {i}");
    }
    assert!(f.stats().dropped > 0);
    settle(&p);
}

#[test]
fn a_resend_that_starts_with_packets_already_taken_places_only_the_new_ones() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (src, data, dst) = patterned(&a, 3_000, &b, 4_000, |j| (j % 251) as u8);
    post_recv(&qb, 1, dst.sge(0, 4_000));
    // Three packets (MTU 1024): the second is taken but its ACK comes too late, the third is
    // lost. The ACK timer resends the second and third: the second is a duplicate, the third
    // new.
    f.script(&[PacketFate::Deliver, PacketFate::Delay, PacketFate::Drop]);
    post_send(&qa, 1, src.sge(0, 3_000));
    run_timers(&p, 1000);
    let s = poll_all(&ca);
    assert_eq!((s.len(), s[0].status), (1, WcStatus::Success));
    let r = poll_all(&cb);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 3_000));
    assert_eq!(&dst.buf.to_vec()[..3_000], &data[..]);
    // The next message is taken whole, in sequence.
    post_recv(&qb, 2, dst.sge(0, 4_000));
    post_send(&qa, 2, src.sge(0, 3_000));
    run_timers(&p, 1000);
    assert_eq!(poll_all(&ca)[0].status, WcStatus::Success);
    assert_eq!(poll_all(&cb)[0].status, WcStatus::Success);
    settle(&p);
}

#[test]
fn the_link_keeps_counting_what_a_destroyed_qp_sent() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (m, rb) = mems(&a, 16, &b, 16);
    for i in 0..3 {
        post_recv(&qb, i, rb.sge(0, 16));
        post_send(&qa, i, m.sge(0, 8));
    }
    assert_eq!((poll_all(&ca).len(), poll_all(&cb).len()), (3, 3));
    let sent = f.stats().delivered;
    assert!(sent >= 3, "{sent}");
    // The counters are the link's: its QPs going away takes nothing back.
    a.hca.destroy_qp(qa.soft);
    assert_eq!(f.stats().delivered, sent);
    b.hca.destroy_qp(qb.soft);
    assert_eq!(f.stats().delivered, sent);
    settle(&p);
}

/// The draws fault injection makes for `seed`: Vigna's xorshift64* (shifts 12, 25 and 27,
/// multiplier `0x2545F4914F6CDD1D`) from the seed with its low bit set (a zero state is
/// xorshift's fixed point), each draw the high half of an output modulo a million: a packet's
/// place among the parts per million of [`FaultConfig`].
fn draws(seed: u64) -> impl Iterator<Item = u32> {
    let mut x = seed | 1;
    std::iter::repeat_with(move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32 % 1_000_000
    })
}

/// The fate `cfg` gives a packet whose draw is `r`: the first `drop_ppm` parts per million are
/// dropped, the next `corrupt_ppm` corrupted, the next `delay_ppm` delayed.
fn fate_of(cfg: &FaultConfig, r: u32) -> PacketFate {
    let corrupt = cfg.drop_ppm + cfg.corrupt_ppm;
    if r < cfg.drop_ppm {
        PacketFate::Drop
    } else if r < corrupt {
        PacketFate::Corrupt
    } else if r < corrupt + cfg.delay_ppm {
        PacketFate::Delay
    } else {
        PacketFate::Deliver
    }
}

/// One datagram from `a` to `b` (each packet is one datagram), and the fate the link's
/// counters say it had.
struct Datagrams {
    f: std::sync::Arc<Fabric>,
    from: Qp,
    to: UdAddress,
    mem: Mem,
    _keep: (Node, Node, Cq, Cq, Qp),
}

impl Datagrams {
    fn new(f: std::sync::Arc<Fabric>, a: Node, b: Node) -> Datagrams {
        let (ca, cb, qa, qb) = ud_qps(&a, &b, 256);
        let to = ud_to(b.hca.gid(), qb.uvp.qpn());
        let mem = a.mem(64, ALL_ACCESS);
        Datagrams {
            f,
            from: qa,
            to,
            mem,
            _keep: (a, b, ca, cb, qb),
        }
    }

    fn send(&self) -> PacketFate {
        let before = self.f.stats();
        let sg = [self.mem.sge(0, 8)];
        let mut wr = send_wr(1, WrOpcode::Send, &sg);
        wr.ud = Some(self.to);
        self.from.uvp.post_send(&wr).unwrap();
        let after = self.f.stats();
        let moved = [
            (after.delivered - before.delivered, PacketFate::Deliver),
            (after.dropped - before.dropped, PacketFate::Drop),
            (after.corrupted - before.corrupted, PacketFate::Corrupt),
            (after.delayed - before.delayed, PacketFate::Delay),
        ];
        let fates: Vec<_> = moved.iter().filter(|m| m.0 != 0).collect();
        assert_eq!(fates.len(), 1, "one packet: {moved:?}");
        assert_eq!(fates[0].0, 1, "one packet: {moved:?}");
        fates[0].1
    }
}

#[test]
fn each_packets_fate_is_its_draw_among_the_parts_per_million() {
    let (p, f, a, b) = deterministic_pair();
    let link = Datagrams::new(f.clone(), a, b);
    let cfg = FaultConfig {
        seed: 0,
        drop_ppm: 250_000,
        corrupt_ppm: 250_000,
        delay_ppm: 250_000,
    };
    // An odd seed, an even one, and the seed whose low bit is all there is.
    for seed in [0x5EED_0001, 0x5EED_0002, 1] {
        let cfg = FaultConfig { seed, ..cfg };
        f.set_faults(Some(cfg));
        let want: Vec<_> = draws(seed).take(64).map(|r| fate_of(&cfg, r)).collect();
        let got: Vec<_> = (0..64).map(|_| link.send()).collect();
        assert_eq!(got, want, "seed {seed:#x}");
    }
    // The parts per million are half-open ranges: a draw equal to a bound is past it.
    let seed = 0x5EED_0003;
    let r = draws(seed).next().unwrap();
    let none = FaultConfig {
        seed,
        ..FaultConfig::default()
    };
    for (cfg, want) in [
        (
            FaultConfig {
                drop_ppm: r,
                ..none
            },
            PacketFate::Deliver,
        ),
        (
            FaultConfig {
                drop_ppm: r + 1,
                ..none
            },
            PacketFate::Drop,
        ),
        (
            FaultConfig {
                corrupt_ppm: r,
                ..none
            },
            PacketFate::Deliver,
        ),
        (
            FaultConfig {
                corrupt_ppm: r + 1,
                ..none
            },
            PacketFate::Corrupt,
        ),
        (
            FaultConfig {
                delay_ppm: r,
                ..none
            },
            PacketFate::Deliver,
        ),
        (
            FaultConfig {
                delay_ppm: r + 1,
                ..none
            },
            PacketFate::Delay,
        ),
    ] {
        f.set_faults(Some(cfg));
        assert_eq!(link.send(), want, "{cfg:?}, draw {r}");
    }
    f.set_faults(None);
    settle(&p);
}

#[test]
fn turning_the_generator_off_leaves_the_script() {
    let (p, f, a, b) = deterministic_pair();
    let link = Datagrams::new(f.clone(), a, b);
    f.set_faults(Some(FaultConfig::default()));
    f.script(&[PacketFate::Drop, PacketFate::Corrupt]);
    f.set_faults(None);
    assert_eq!(link.send(), PacketFate::Drop);
    assert_eq!(link.send(), PacketFate::Corrupt);
    assert_eq!(link.send(), PacketFate::Deliver);
    settle(&p);
}

#[test]
fn a_message_resent_from_its_middle_is_gathered_from_the_right_pieces() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair(); // path MTU 1024
    // The message is gathered from three pieces of one region, with bytes between them that
    // are not part of it.
    let src = a.mem(4_096, ALL_ACCESS);
    src.buf.write(0, &[0xEE; 4_096]).unwrap();
    let data: Vec<u8> = (0..3_000).map(|j| (j % 247) as u8).collect();
    src.buf.write(0, &data[..500]).unwrap();
    src.buf.write(600, &data[500..1_500]).unwrap();
    src.buf.write(1_700, &data[1_500..]).unwrap();
    let sg = [src.sge(0, 500), src.sge(600, 1_000), src.sge(1_700, 1_500)];
    let dst = b.mem(3_000, ALL_ACCESS);
    post_recv(&qb, 1, dst.sge(0, 3_000));
    // The second packet is lost: the third is out of sequence, and the requester resends from
    // byte 1024, which lies 524 bytes into the second piece; the resend runs on into the third.
    f.script(&[PacketFate::Deliver, PacketFate::Drop]);
    qa.uvp.post_send(&send_wr(1, WrOpcode::Send, &sg)).unwrap();
    assert_eq!(poll_all(&ca)[0].status, WcStatus::Success);
    let r = poll_all(&cb);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 3_000));
    assert_eq!(dst.buf.to_vec(), data);
    assert_eq!(f.stats().dropped, 1);
    settle(&p);
}
