//! Client memory as the device reaches it (`dma`): pool buffers, blocks shared with a client
//! process, and (Linux, the `std` feature) the memory of client processes reached through the
//! kernel's cross-address-space copies, with its registration checks, the process a serving
//! thread is attached to, and the rules for a client that has gone.

use wv_softhca::*;

#[test]
fn a_dma_buffer_is_empty_only_when_it_has_no_bytes() {
    let pool = BufferPool::new();
    let none = pool.alloc(0);
    assert_eq!((none.len(), none.is_empty()), (0, true));
    assert!(none.to_vec().is_empty());
    let one = pool.alloc(1);
    assert_eq!((one.len(), one.is_empty()), (1, false));
}

#[test]
fn a_shared_block_with_a_null_base_has_no_words() {
    struct Keep;
    impl dma::BlockOwner for Keep {
        fn release(&self, _addr: u64, _len: usize) {}
    }
    // SAFETY: a null base breaks `new`'s contract only in a way it refuses: the block is
    // empty, and an empty block's memory is never reached.
    let null = unsafe {
        dma::SharedBlock::new(core::ptr::null_mut(), 64, 0xa000, std::sync::Arc::new(Keep))
    };
    assert!(null.is_empty());
    // An empty slice that no pointer of the block went into (the block's own is dangling).
    assert!(null.words32().is_empty());
}

#[cfg(all(feature = "std", target_os = "linux"))]
mod process_memory {
    use std::sync::{Arc, Mutex};

    use crate::common::*;
    use wv_hal::*;
    use wv_softhca::dma::process::{self, Client, Fault};
    use wv_softhca::dma::{BlockOwner, SharedBlock};
    use wv_softhca::*;

    const PAGE: usize = 4096;

    /// An anonymous private mapping of this process, unmapped when dropped. Its bytes are read
    /// and written here only while no copy of the device runs.
    struct Mapping {
        ptr: *mut u8,
        len: usize,
    }

    impl Mapping {
        fn new(len: usize) -> Mapping {
            Mapping {
                ptr: anonymous_mapping(len),
                len,
            }
        }

        fn addr(&self, off: usize) -> u64 {
            self.ptr.addr() as u64 + off as u64
        }

        fn fill(&self, off: usize, bytes: &[u8]) {
            assert!(off + bytes.len() <= self.len);
            // Inside the mapping (checked above), which lives as long as `self`; nothing else
            // writes it meanwhile.
            let to = self.ptr.wrapping_add(off);
            // SAFETY: `to` and the `bytes.len()` bytes after it are in the mapping, writable,
            // and distinct from `bytes`.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), to, bytes.len()) };
        }

        fn bytes(&self) -> Vec<u8> {
            // SAFETY: the whole mapping, readable for as long as `self` lives.
            unsafe { core::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: the mapping `new` made, unmapped once.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
    }

    fn me() -> i32 {
        std::process::id() as i32
    }

    /// A device whose client memory is the memory of the process it serves, limited in a
    /// region's size only by the address space (as mlx5 reports `max_mr_size`).
    fn process_node(p: &wv_host::HostPlatform) -> Node {
        let mut config = DeviceConfig::new("soft", mac());
        config.limits.max_mr_size = u64::MAX;
        Node::with_memory(p, config, ClientMemory::process(), BufferPool::new())
    }

    /// A deterministic platform, a device of process memory on it, and a page of this
    /// process's own.
    fn process_node_and_page() -> (wv_host::HostPlatform, Node, Mapping) {
        let p = wv_host::HostPlatform::deterministic();
        let b = process_node(&p);
        (p, b, Mapping::new(PAGE))
    }

    fn register(n: &Node, addr: u64, len: u64) -> Result<(SoftMr, u32), VerbsError> {
        let region = MemoryRegion {
            address: addr,
            length: len,
            access: ALL_ACCESS,
        };
        n.hca
            .register_mr(&n.pd, &region)
            .map(|(mr, keys)| (mr, u32::from_be(keys.rkey)))
    }

    /// A (pool memory) and B (process memory) on one fabric, an RC QP on each, connected.
    fn pool_to_process() -> (
        wv_host::HostPlatform,
        Arc<Fabric>,
        Node,
        Node,
        Cq,
        Cq,
        Qp,
        Qp,
    ) {
        let p = wv_host::HostPlatform::deterministic();
        let a = Node::simple(&p);
        let b = process_node(&p);
        let f = fabric_of(&a, &b);
        let (ca, cb, qa, qb) = two_qps(&a, &b, QpType::Rc, 64);
        connect(&a, &qa, &b, &qb, Conn::default());
        (p, f, a, b, ca, cb, qa, qb)
    }

    /// Posts an RDMA `op` between `local` and `remote_addr`/`rkey` and returns its completion.
    fn rdma(
        p: &wv_host::HostPlatform,
        qa: &Qp,
        ca: &Cq,
        op: WrOpcode,
        local: Sge,
        remote_addr: u64,
        rkey: u32,
    ) -> WcStatus {
        let sg = [local];
        let mut wr = send_wr(1, op, &sg);
        wr.remote_addr = remote_addr;
        wr.rkey = rkey;
        qa.uvp.post_send(&wr).unwrap();
        p.run_until_idle();
        let wc = poll_all(ca);
        assert_eq!(wc.len(), 1);
        wc[0].status
    }

    #[test]
    fn rdma_into_a_process_registration_lands_at_its_offset_and_nowhere_else() {
        let (p, _f, a, b, ca, _cb, qa, _qb) = pool_to_process();
        let m = Mapping::new(3 * PAGE);
        let (_mr, rkey) = register(&b, m.addr(PAGE), PAGE as u64).unwrap();
        let src = a.mem_holding(64, b"into the process");
        let at = m.addr(PAGE + 64);
        assert_eq!(
            rdma(&p, &qa, &ca, WrOpcode::RdmaWrite, src.sge(0, 16), at, rkey),
            WcStatus::Success
        );
        let mut want = vec![0u8; 3 * PAGE];
        want[PAGE + 64..PAGE + 80].copy_from_slice(b"into the process");
        assert!(m.bytes() == want, "the 16 bytes at offset 64, nothing else");
        // And read back from that offset.
        assert_eq!(
            rdma(&p, &qa, &ca, WrOpcode::RdmaRead, src.sge(32, 16), at, rkey),
            WcStatus::Success
        );
        assert_eq!(&src.buf.to_vec()[32..48], b"into the process");
        settle(&p);
    }

    #[test]
    fn a_gone_clients_registration_drops_the_writes_into_it_and_reads_as_zeros() {
        let (p, _f, a, b, ca, _cb, qa, _qb) = pool_to_process();
        let m = Mapping::new(3 * PAGE);
        m.fill(PAGE, &[0x77; PAGE]);
        let client = Client::new(me(), None);
        let (_mr, rkey) = {
            let _served = process::attach(&client);
            register(&b, m.addr(PAGE), PAGE as u64).unwrap()
        };
        client.set_gone();
        let before = m.bytes();
        let local = a.mem(64, ALL_ACCESS);
        local.buf.write(0, &[0xaa; 64]).unwrap();
        // The peer's requests complete as on a real fabric; nothing lands in the memory the
        // gone process registered, and what is read from it is zeros.
        assert_eq!(
            rdma(
                &p,
                &qa,
                &ca,
                WrOpcode::RdmaWrite,
                local.sge(0, 16),
                m.addr(PAGE),
                rkey
            ),
            WcStatus::Success
        );
        assert!(m.bytes() == before, "a write into a gone client is dropped");
        assert_eq!(
            rdma(
                &p,
                &qa,
                &ca,
                WrOpcode::RdmaRead,
                local.sge(16, 32),
                m.addr(PAGE + 8),
                rkey
            ),
            WcStatus::Success
        );
        let got = local.buf.to_vec();
        assert_eq!(&got[16..48], &[0; 32]);
        assert_eq!(&got[48..], &[0xaa; 16]);
        settle(&p);
    }

    #[test]
    fn a_registration_that_no_memory_can_back_is_an_invalid_parameter_before_any_probe() {
        let (p, b, m) = process_node_and_page();
        assert!(register(&b, m.addr(0), PAGE as u64).is_ok());
        // As ib_umem_get answers EINVAL for a range that wraps or is too long, before it
        // looks at a page: nothing to probe.
        let invalid = Err(VerbsError::InvalidParameter);
        assert_eq!(register(&b, m.addr(0), 0).map(|_| ()), invalid);
        assert_eq!(register(&b, 0, PAGE as u64).map(|_| ()), invalid);
        assert_eq!(
            register(&b, u64::MAX - 0xfff, 0x2000).map(|_| ()),
            invalid,
            "wraps"
        );
        assert_eq!(
            register(&b, m.addr(0), 1 << 63).map(|_| ()),
            invalid,
            "longer than any address space"
        );
        // A range that could exist but is not mapped is the probe's fault.
        assert_eq!(
            register(&b, 1 << 47, PAGE as u64).map(|_| ()),
            Err(VerbsError::InvalidPermission)
        );
        settle(&p);
    }

    #[test]
    fn an_attachment_ends_with_its_guard_and_gives_back_the_one_before() {
        let (p, b, m) = process_node_and_page();
        let gone = Client::new(me(), None);
        gone.set_gone();
        let live = Client::new(me(), None);
        let refused = Err(VerbsError::InvalidPermission);
        {
            let _served = process::attach(&gone);
            assert_eq!(register(&b, m.addr(0), 64).map(|_| ()), refused);
            {
                let _inner = process::attach(&live);
                assert!(register(&b, m.addr(0), 64).is_ok());
            }
            // The outer attachment again.
            assert_eq!(register(&b, m.addr(0), 64).map(|_| ()), refused);
        }
        // No attachment: this process.
        assert!(register(&b, m.addr(0), 64).is_ok());
        settle(&p);
    }

    #[test]
    fn a_client_reports_the_memory_it_shares() {
        struct NoMemory;
        impl dma::SharedMemory for NoMemory {
            fn alloc(&self, _bytes: usize) -> Result<SharedBlock, AllocError> {
                Err(AllocError)
            }
            fn add_doorbell(&self, _doorbell: uvp::Doorbell) -> Result<(), AllocError> {
                Err(AllocError)
            }
        }
        let shared: Arc<dyn dma::SharedMemory> = Arc::new(NoMemory);
        let with = Client::new(me() + 1, Some(shared.clone()));
        assert!(with.shared().is_some_and(|s| Arc::ptr_eq(s, &shared)));
        assert!(Client::new(me() + 1, None).shared().is_none());
    }

    /// Records what a block gives back.
    #[derive(Default)]
    struct Releases(Mutex<Vec<(u64, usize)>>);
    impl BlockOwner for Releases {
        fn release(&self, addr: u64, len: usize) {
            self.0.lock().unwrap().push((addr, len));
        }
    }

    #[test]
    fn a_shared_block_is_its_words_and_gives_its_memory_back_when_dropped() {
        let m = Mapping::new(PAGE);
        let owner = Arc::new(Releases::default());
        let block = |len| {
            // SAFETY: page-aligned memory of this test, mapped until `m` drops (after the
            // blocks), reached only through 32-bit word views of blocks.
            unsafe { SharedBlock::new(m.ptr, len, 0x9000, owner.clone()) }
        };
        let a = block(64);
        assert_eq!((a.addr(), a.len(), a.is_empty()), (0x9000, 64, false));
        assert_eq!(a.words32().len(), 16);
        // Two views of the same memory see each other's words.
        let b = block(64);
        a.words32()[15].store(0xfeed_f00d, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            b.words32()[15].load(std::sync::atomic::Ordering::Relaxed),
            0xfeed_f00d
        );
        assert!(owner.0.lock().unwrap().is_empty());
        drop(a);
        assert_eq!(*owner.0.lock().unwrap(), vec![(0x9000, 64)]);
        drop(b);
        // A null base is refused as empty.
        // SAFETY: a null base is never read (the block is empty).
        let null = unsafe { SharedBlock::new(core::ptr::null_mut(), 64, 0xa000, owner.clone()) };
        assert_eq!((null.len(), null.is_empty()), (0, true));
        drop(null);
        assert_eq!(owner.0.lock().unwrap().len(), 3);
    }

    /// A process that has exited and been reaped: its pid names nothing.
    fn exited_pid() -> i32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        pid
    }

    #[test]
    fn a_copy_that_finds_the_process_exited_marks_it_gone_and_acts_as_for_a_gone_one() {
        let here = Client::this_process();
        let m = Mapping::new(PAGE);
        m.fill(0, &[0xff; PAGE]);
        // Reading: zeros, and the client is gone from now on.
        let reader = Client::new(exited_pid(), None);
        assert_eq!(
            process::copy_between(&reader, 0x10000, &here, m.addr(0), 64),
            Ok(())
        );
        assert!(reader.is_gone());
        assert_eq!(&m.bytes()[..64], &[0; 64]);
        assert_eq!(&m.bytes()[64..], &[0xff; PAGE - 64][..]);
        // Writing: dropped.
        let writer = Client::new(exited_pid(), None);
        assert_eq!(
            process::copy_between(&here, m.addr(0), &writer, 0x10000, 64),
            Ok(())
        );
        assert!(writer.is_gone());
    }

    #[test]
    fn a_copy_from_an_unmapped_address_of_a_live_process_fails_and_leaves_it_known() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let live = Client::new(child.id() as i32, None);
        let m = Mapping::new(PAGE);
        let here = Client::this_process();
        let read = process::copy_between(&live, 1 << 47, &here, m.addr(0), 64);
        let write = process::copy_between(&here, m.addr(0), &live, 1 << 47, 64);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!((read, write), (Err(Fault::Unmapped), Err(Fault::Unmapped)));
        assert!(!live.is_gone());
    }

    #[test]
    fn reading_a_gone_client_zeroes_exactly_the_bytes_asked_for() {
        let gone = Client::new(me(), None);
        gone.set_gone();
        let m = Mapping::new(4 * PAGE);
        m.fill(0, &[0xff; 4 * PAGE]);
        // More than one page of zeros, in the middle of the mapping.
        let (at, len) = (PAGE, PAGE + 904);
        assert_eq!(
            process::copy_between(&gone, 0x10000, &Client::this_process(), m.addr(at), len),
            Ok(())
        );
        let got = m.bytes();
        assert!(got[..at].iter().all(|&b| b == 0xff), "before untouched");
        assert!(got[at..at + len].iter().all(|&b| b == 0), "all zeroed");
        assert!(
            got[at + len..].iter().all(|&b| b == 0xff),
            "after untouched"
        );
    }

    #[test]
    fn a_gone_client_of_this_process_is_reached_no_more_than_one_of_another_process() {
        // A client record of this very process, marked gone: as for a client in another
        // process, a copy into it is dropped and a copy out of it gives zeros, whichever
        // process the other end of the copy is.
        let here = Client::this_process();
        let gone = Client::new(me(), None);
        gone.set_gone();
        let m = Mapping::new(3 * PAGE);
        m.fill(0, &[0x11; PAGE]);
        m.fill(PAGE, &[0x22; PAGE]);
        m.fill(2 * PAGE, &[0x33; PAGE]);
        let copied_here = process::copy_between(&here, m.addr(0), &gone, m.addr(PAGE), 64);
        // A forked child has the mapping at the same address with the same bytes.
        // SAFETY: the child only waits for its signal (async-signal-safe calls alone, as a
        // child of a threaded process must); it is killed and reaped below.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            loop {
                // SAFETY: pause has no preconditions.
                unsafe { libc::pause() };
            }
        }
        let child = Client::new(pid, None);
        let copied_in = process::copy_between(&child, m.addr(0), &gone, m.addr(PAGE + 64), 64);
        let copied_out = process::copy_between(&gone, m.addr(0), &child, m.addr(2 * PAGE), 64);
        let back = Mapping::new(PAGE);
        back.fill(0, &[0xff; PAGE]);
        let read = process::copy_between(&child, m.addr(2 * PAGE), &here, back.addr(0), 128);
        // SAFETY: `pid` is our child, killed once.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        // SAFETY: `pid` is our child, reaped once; no status is asked for.
        unsafe { libc::waitpid(pid, core::ptr::null_mut(), 0) };
        assert_eq!(
            (copied_here, copied_in, copied_out, read),
            (Ok(()), Ok(()), Ok(()), Ok(()))
        );
        let (mine, got) = (m.bytes(), back.bytes());
        assert_eq!(
            (
                mine[PAGE..PAGE + 64] == [0x22; 64],
                mine[PAGE + 64..PAGE + 128] == [0x22; 64],
                got[..64] == [0; 64],
            ),
            (true, true, true),
            "dropped: a copy into it from this process, from another process; \
             zeros: a copy out of it into another process"
        );
        assert_eq!(&got[64..128], &[0x33; 64], "nothing past the copy");
        assert!(mine[PAGE + 128..].iter().all(|&b| b == 0x33 || b == 0x22));
    }

    #[test]
    fn a_copy_between_two_other_processes_moves_their_bytes_in_pieces_and_nothing_else() {
        // Longer than one piece of the service's bounce buffer (256 KiB).
        const LEN: usize = (256 << 10) + 4196;
        let (src, dst) = (256 << 10, 1 << 20);
        let m = Mapping::new(2 << 20);
        let pattern: Vec<u8> = (0..LEN).map(|i| (i * 7 % 251) as u8 + 1).collect();
        m.fill(src, &pattern);
        m.fill(dst - PAGE, &[0x5a; PAGE]);
        m.fill(dst + LEN, &[0x5a; PAGE]);
        // A forked child has the mapping at the same address with the same bytes.
        // SAFETY: the child only waits for its signal (async-signal-safe calls alone, as a
        // child of a threaded process must); it is killed and reaped below.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            loop {
                // SAFETY: pause has no preconditions.
                unsafe { libc::pause() };
            }
        }
        // This process's copy changes: only the child's bytes may move.
        m.fill(src, &vec![0xee; LEN]);
        let child = Client::new(pid, None);
        let copied = process::copy_between(&child, m.addr(src), &child, m.addr(dst), LEN);
        let back = Mapping::new(LEN + 2 * PAGE);
        let read = process::copy_between(
            &child,
            m.addr(dst - PAGE),
            &Client::this_process(),
            back.addr(0),
            LEN + 2 * PAGE,
        );
        // SAFETY: `pid` is our child, killed once.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        // SAFETY: `pid` is our child, reaped once; no status is asked for.
        unsafe { libc::waitpid(pid, core::ptr::null_mut(), 0) };
        assert_eq!((copied, read), (Ok(()), Ok(())));
        let got = back.bytes();
        assert!(got[..PAGE].iter().all(|&b| b == 0x5a), "before untouched");
        assert!(
            got[PAGE..PAGE + LEN] == pattern[..],
            "the child's bytes, in order"
        );
        assert!(
            got[PAGE + LEN..].iter().all(|&b| b == 0x5a),
            "after untouched"
        );
    }
}
