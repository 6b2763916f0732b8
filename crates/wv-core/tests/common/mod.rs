//! A small DSL over the host model for the core's tests: raw IOCTL bytes in, `IoStatus` out.
#![allow(dead_code, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use std::mem::size_of;
use wv_abi::ioctl::*;

use wv_abi::{
    NtStatus, WV_IO_AH_CREATE, WV_IO_DEVICE_ATTRIBUTES, WV_IO_DEVICE_PORT_QUERY, WV_IO_GID,
    WV_IO_ID, WV_IO_MEMORY_KEYS, WV_IO_MEMORY_REGISTER, WV_IO_PORT_ATTRIBUTES, WV_IO_QP_ATTRIBUTES,
    WV_IO_QP_CREATE, WV_IO_QP_MULTICAST, WV_IO_SRQ_ATTRIBUTES, read_prefix,
};
use wv_core::{Driver, DriverConfig};
use wv_hal::{FilterDriver, QpState};
use wv_host::fake_cm::FakeCm;
use wv_host::fake_verbs::{FakeCall, FakeConfig, FakeVerbs};
use wv_host::{File, HostPlatform, HostRequest, Io, IoManager, IoStatus};

pub mod ep;
mod input;

pub use input::*;

pub type Drv = Driver<HostPlatform, Arc<FakeVerbs>>;
pub type WvFile = File<Drv>;

/// The platform the scenario tests run on: `WV_HOST_MODE=threaded` selects the threaded host
/// model (two PASSIVE workers, DPCs on the interrupting thread); anything else, or nothing, the
/// deterministic one.
pub fn mode() -> HostPlatform {
    match std::env::var("WV_HOST_MODE").as_deref() {
        Ok("threaded") => HostPlatform::threaded(2),
        _ => HostPlatform::deterministic(),
    }
}

/// The core let go of `hca`: no verbs object of it is left, and fewer references to it are
/// held than `refs_before`, counted while the core used it. `when` names the moment.
pub fn assert_lower_released(hca: &Arc<FakeVerbs>, refs_before: usize, when: &str) {
    assert!(
        hca.live_objects().is_empty(),
        "verbs objects left {when}: {:?}",
        hca.live_objects()
    );
    assert!(
        Arc::strong_count(hca) < refs_before,
        "the core still holds the verbs interface {when}"
    );
}

/// One driver on one platform with one fake HCA and the fake CM of its stack.
pub struct Fx {
    pub io: IoManager<Drv>,
    pub hca: Arc<FakeVerbs>,
    pub cm: Arc<FakeCm>,
}

impl Fx {
    /// The default fixture: deterministic mode, or the threaded mode when the environment
    /// says `WV_HOST_MODE=threaded` (CI runs the suite in both modes).
    pub fn new() -> Fx {
        Fx::with(mode(), DriverConfig::default())
    }

    pub fn threaded() -> Fx {
        Fx::with(HostPlatform::threaded(4), DriverConfig::default())
    }

    pub fn config(config: DriverConfig) -> Fx {
        Fx::with(mode(), config)
    }

    /// On the threaded host model the fake's QP commands take 5 ms: far longer than a hand-off
    /// to a worker on the real clock, so every QP_MODIFY goes to the work item, as the tests
    /// written for it expect, whatever the machine's load (a faster controller's modifies run
    /// in the caller's thread; the deterministic tests choose that with their clock).
    pub fn with(platform: HostPlatform, config: DriverConfig) -> Fx {
        let hca = if platform.is_deterministic() {
            FakeConfig::default()
        } else {
            FakeConfig {
                modify_ns: 5_000_000,
                ..FakeConfig::default()
            }
        };
        Fx::with_hca(platform, config, hca)
    }

    pub fn with_hca(platform: HostPlatform, config: DriverConfig, hca: FakeConfig) -> Fx {
        let hca = FakeVerbs::new(&platform, hca);
        let cm = FakeCm::new(&platform);
        let driver = Arc::new(Driver::new(platform.clone(), config));
        let io = IoManager::new(platform, driver);
        io.arrive_with_cm(Arc::clone(&hca), Some(Arc::clone(&cm)))
            .expect("arrival");
        Fx { io, hca, cm }
    }

    pub fn platform(&self) -> &HostPlatform {
        self.io.platform()
    }

    pub fn driver(&self) -> &Arc<Drv> {
        self.io.driver()
    }

    /// A second fake controller, with GUID `guid` and no CM, arrives.
    pub fn arrive_hca(&self, guid: u64) -> Arc<FakeVerbs> {
        let config = FakeConfig {
            guid,
            ..FakeConfig::default()
        };
        let hca = FakeVerbs::new(self.platform(), config);
        self.io.arrive(Arc::clone(&hca)).expect("arrival");
        hca
    }

    pub fn guid(&self) -> u64 {
        wv_hal::Verbs::guid(&*self.hca)
    }

    pub fn open(&self) -> WvFile {
        self.io.open().expect("CreateFile")
    }

    /// The fake's id of the last object `call` created.
    pub fn last_created(&self, call: FakeCall) -> u64 {
        self.hca
            .calls()
            .iter()
            .rev()
            .find(|c| c.call == call && c.result.is_ok())
            .map(|c| c.object)
            .expect("no such call")
    }

    pub fn run(&self) {
        self.platform().run_until_idle();
    }
}

/// An IOCTL that must complete inline.
#[track_caller]
pub fn ioctl(file: &WvFile, code: u32, input: &[u8], out_len: usize) -> IoStatus {
    let io = file.device_io_control(code, input, out_len);
    assert!(!io.pending(), "IOCTL {code:#x} pended");
    io.wait()
}

/// An IOCTL that must pend.
#[track_caller]
pub fn pend(file: &WvFile, code: u32, input: &[u8], out_len: usize) -> Io {
    let io = file.device_io_control(code, input, out_len);
    assert!(
        io.pending(),
        "IOCTL {code:#x} completed inline: {:?}",
        io.try_result()
    );
    io
}

#[track_caller]
pub fn status(st: &IoStatus) -> NtStatus {
    NtStatus(st.status)
}

#[track_caller]
pub fn expect(st: &IoStatus, want: NtStatus) {
    assert_eq!(NtStatus(st.status), want, "{st:?}");
}

/// An IOCTL that must complete inline with `want`; its status, for the checks that follow.
#[track_caller]
pub fn expect_ioctl(
    file: &WvFile,
    code: u32,
    input: &[u8],
    out_len: usize,
    want: NtStatus,
) -> IoStatus {
    let st = ioctl(file, code, input, out_len);
    expect(&st, want);
    st
}

/// DEVICE_QUERY of device `dev` with room for its attributes, which must complete inline
/// with `want`.
#[track_caller]
pub fn device_query(file: &WvFile, dev: u64, want: NtStatus) {
    expect_ioctl(file, WV_IOCTL_DEVICE_QUERY, &u64_in(dev), 152, want);
}

/// MW_ALLOCATE on PD `pd`, which must complete inline with `want`.
#[track_caller]
pub fn mw_allocate(file: &WvFile, pd: u64, want: NtStatus) {
    expect_ioctl(file, WV_IOCTL_MW_ALLOCATE, &id(pd, 0, 0), 16, want);
}

/// AH_CREATE of [`ah_in`] on PD `pd`, which must complete inline with `want`.
#[track_caller]
pub fn ah_create(file: &WvFile, pd: u64, want: NtStatus) {
    expect_ioctl(file, WV_IOCTL_AH_CREATE, &bytes(&ah_in(pd)), 64, want);
}

/// An IOCTL whose input is one id and whose output is nothing (a destroy, close or cancel),
/// which must complete inline with `want`.
#[track_caller]
pub fn id_ioctl(file: &WvFile, code: u32, id: u64, want: NtStatus) {
    expect_ioctl(file, code, &u64_in(id), 0, want);
}

/// Waits (bounded: a hang guard, not a timing assertion) for a pended request.
#[track_caller]
pub fn done(io: &Io) -> IoStatus {
    io.wait_timeout(Duration::from_secs(20))
        .expect("request never completed")
}

pub fn out<T: zerocopy::FromBytes>(st: &IoStatus) -> T {
    read_prefix(&st.output).expect("output too short")
}

/// DEVICE_OPEN of the fixture's HCA; returns the device id.
pub fn open_device(fx: &Fx, file: &WvFile) -> u64 {
    let st = ioctl(file, WV_IOCTL_DEVICE_OPEN, &id(fx.guid(), 0, 0), 16);
    expect(&st, NtStatus::SUCCESS);
    out::<WV_IO_ID>(&st).Id
}

/// The default fixture and a file open on it (declared in that order, so the file goes
/// before the fixture when dropped).
pub fn file_fixture() -> (Fx, WvFile) {
    let fx = Fx::new();
    let f = fx.open();
    (fx, f)
}

/// [`file_fixture`] and the device opened on its file.
pub fn device_fixture() -> (Fx, WvFile, u64) {
    let (fx, f) = file_fixture();
    let dev = open_device(&fx, &f);
    (fx, f, dev)
}

pub fn alloc_pd(file: &WvFile, dev: u64) -> u64 {
    let st = ioctl(file, WV_IOCTL_PD_ALLOCATE, &id(dev, 0, 0), 16);
    expect(&st, NtStatus::SUCCESS);
    out::<WV_IO_ID>(&st).Id
}

pub fn cq(file: &WvFile, dev: u64, entries: u32) -> u64 {
    let st = ioctl(file, WV_IOCTL_CQ_CREATE, &id(dev, 0, entries), 16);
    expect(&st, NtStatus::SUCCESS);
    out::<WV_IO_ID>(&st).Id
}

pub fn srq_attr(id: u64, max_wr: u32, limit: u32) -> WV_IO_SRQ_ATTRIBUTES {
    WV_IO_SRQ_ATTRIBUTES {
        Id: WV_IO_ID::new(id, 0),
        MaxWr: max_wr,
        MaxSge: 1,
        SrqLimit: limit,
        Reserved: 0,
    }
}

pub fn srq(file: &WvFile, pd: u64) -> u64 {
    let st = ioctl(file, WV_IOCTL_SRQ_CREATE, &bytes(&srq_attr(pd, 16, 0)), 32);
    expect(&st, NtStatus::SUCCESS);
    out::<WV_IO_SRQ_ATTRIBUTES>(&st).Id.Id
}

/// QP_CREATE of [`qp_create_in`], with room for its output; must complete inline.
#[track_caller]
pub fn qp_create(file: &WvFile, pd: u64, scq: u64, rcq: u64, srq: u64) -> IoStatus {
    let input = bytes(&qp_create_in(pd, scq, rcq, srq));
    ioctl(file, WV_IOCTL_QP_CREATE, &input, 72)
}

pub fn qp(file: &WvFile, pd: u64, scq: u64, rcq: u64, srq: u64) -> u64 {
    let st = qp_create(file, pd, scq, rcq, srq);
    expect(&st, NtStatus::SUCCESS);
    out::<WV_IO_QP_CREATE>(&st).Id.Id
}

/// The hand-off to a worker the measured tests start from.
pub const HAND_OFF_NS: u64 = 50_000;

/// From now on the device's QP commands take `command_ns` each, and the driver has measured
/// them and a hand-off of [`HAND_OFF_NS`]: one QP_MODIFY (of a QP on a file of its own) whose
/// worker starts that long after it was queued gives both their first sample. Deterministic
/// fixtures only.
pub fn measured(fx: &Fx, command_ns: u64) {
    fx.hca.configure(|c| c.modify_ns = command_ns);
    let f = fx.open();
    let dev = open_device(fx, &f);
    let pd = alloc_pd(&f, dev);
    let cq = cq(&f, dev, 16);
    let qp = qp(&f, pd, cq, cq, 0);
    let io = pend(&f, WV_IOCTL_QP_MODIFY, &modify_in(qp, QpState::Init), 8);
    fx.platform().advance_clock(HAND_OFF_NS);
    fx.run();
    expect(&done(&io), NtStatus::SUCCESS);
}

pub fn modify_in(qp: u64, to: QpState) -> Vec<u8> {
    let mut attr = WV_IO_QP_ATTRIBUTES::default();
    attr.Id.Id = qp;
    attr.QpState = to as u8;
    attr.Options = wv_abi::consts::WV_IO_QP_ATTR_STATE;
    attr.AddressVector.PortNumber = 1;
    attr.PathMtu = 1024;
    bytes(&attr)
}

/// QP_MODIFY to `to`, waited for; returns its status.
pub fn modify(file: &WvFile, qp: u64, to: QpState) -> IoStatus {
    let io = file.device_io_control(WV_IOCTL_QP_MODIFY, &modify_in(qp, to), 8);
    done(&io)
}

/// A full stack: device, PD, one CQ, an RC QP in RTS.
pub struct Stack {
    pub dev: u64,
    pub pd: u64,
    pub cq: u64,
    pub qp: u64,
}

/// Device, PD, a CQ of `entries` and an RC QP on it, in RESET.
pub fn qp_reset(fx: &Fx, file: &WvFile, entries: u32) -> Stack {
    let dev = open_device(fx, file);
    let pd = alloc_pd(file, dev);
    let cq = cq(file, dev, entries);
    let qp = qp(file, pd, cq, cq, 0);
    Stack { dev, pd, cq, qp }
}

/// [`qp_reset`] with 64 CQ entries and the QP moved to RTS.
pub fn qp_rts(fx: &Fx, file: &WvFile) -> Stack {
    let s = qp_reset(fx, file, 64);
    for to in [QpState::Init, QpState::Rtr, QpState::Rts] {
        expect(&modify(file, s.qp, to), NtStatus::SUCCESS);
    }
    s
}

/// CQ_NOTIFY of `kind` (`WV_CQ_*`) on `cq`, which must pend.
#[track_caller]
pub fn park_cq_notify(file: &WvFile, cq: u64, kind: u32) -> Io {
    pend(file, WV_IOCTL_CQ_NOTIFY, &id(cq, 0, kind), 0)
}

/// A device with a 16-entry CQ: the fixture, the CQ's id and its id in the fake controller.
pub fn cq_fixture() -> (Fx, WvFile, u64, u64) {
    let (fx, f, dev) = device_fixture();
    let cq = cq(&f, dev, 16);
    let fake = fx.last_created(FakeCall::CreateCq);
    (fx, f, cq, fake)
}

/// Parks one of each notify on the stack: DEVICE_NOTIFY on port 1, CQ_NOTIFY for the next
/// completion and for an error, SRQ_NOTIFY on `srq`, in that order.
pub fn park_notifies(file: &WvFile, s: &Stack, srq: u64) -> [Io; 4] {
    [
        pend(file, WV_IOCTL_DEVICE_NOTIFY, &id(s.dev, 0, 1), 4),
        park_cq_notify(file, s.cq, wv_abi::consts::WV_CQ_NEXT_COMPLETION),
        park_cq_notify(file, s.cq, wv_abi::consts::WV_CQ_ERROR),
        pend(file, WV_IOCTL_SRQ_NOTIFY, &u64_in(srq), 0),
    ]
}

/// Raw completer for the complete-twice fault.
pub fn raw_completer(req: HostRequest) -> Box<dyn Fn(NtStatus, usize) + Send> {
    let raw = req.into_raw_irp();
    Box::new(move |status, info| raw.complete(status, info))
}

pub fn ah_in(pd: u64) -> WV_IO_AH_CREATE {
    let mut ah = WV_IO_AH_CREATE::default();
    ah.Id.Id = pd;
    ah.AddressVector.PortNumber = 1;
    ah.AddressVector.DLid = 5u16.to_be();
    ah
}

pub fn _use_filter_driver<D: FilterDriver<HostPlatform>>() {}

/// Every kind of object, twice where a destroy needs one of its own: what the tables of valid
/// requests (`valid_request`) refer to.
#[derive(Clone, Copy, Debug)]
pub struct Full {
    pub guid: u64,
    pub dev: u64,
    pub pd: u64,
    pub cq: u64,
    pub srq: u64,
    pub qp: u64,
    pub ud_qp: u64,
    pub lkey: u32,
    pub spare_dev: u64,
    pub spare_pd: u64,
    pub spare_cq: u64,
    pub spare_srq: u64,
    pub spare_qp: u64,
    pub spare_mw: u64,
    pub spare_ah: u64,
    pub spare_lkey: u32,
    /// An Idle endpoint, and one for EP_DESTROY.
    pub ep: u64,
    pub spare_ep: u64,
}

pub fn mc_in(qp: u64, lid: u16) -> Vec<u8> {
    bytes(&WV_IO_QP_MULTICAST {
        Id: WV_IO_ID::new(qp, u32::from(lid.to_be())),
        Gid: WV_IO_GID { Raw: [0xFF; 16] },
    })
}

pub fn mr_reg_in(pd: u64) -> Vec<u8> {
    bytes(&WV_IO_MEMORY_REGISTER {
        Id: pd,
        Address: 0x1000,
        BufferLength: 64,
        AccessFlags: 0,
        Reserved: 0,
    })
}

pub fn port_in(dev: u64, port: u8) -> Vec<u8> {
    bytes(&WV_IO_DEVICE_PORT_QUERY {
        Id: dev,
        PortNumber: port,
        Reserved: [0; 7],
    })
}

fn register(file: &WvFile, pd: u64) -> u32 {
    let st = ioctl(file, WV_IOCTL_MEMORY_REGISTER, &mr_reg_in(pd), 8);
    expect(&st, NtStatus::SUCCESS);
    out::<WV_IO_MEMORY_KEYS>(&st).Lkey
}

/// Builds [`Full`] on `file`.
pub fn full_stack(fx: &Fx, file: &WvFile) -> Full {
    let s = qp_rts(fx, file);
    let srq = srq(file, s.pd);
    let mut ud = qp_create_in(s.pd, s.cq, s.cq, 0);
    ud.QpType = 3;
    let st = expect_ioctl(file, WV_IOCTL_QP_CREATE, &bytes(&ud), 72, NtStatus::SUCCESS);
    let ud_qp = out::<WV_IO_QP_CREATE>(&st).Id.Id;
    expect(
        &ioctl(file, WV_IOCTL_QP_ATTACH, &mc_in(ud_qp, 0xC001), 0),
        NtStatus::SUCCESS,
    );
    let lkey = register(file, s.pd);
    let spare_lkey = register(file, s.pd);
    let st = ioctl(file, WV_IOCTL_MW_ALLOCATE, &id(s.pd, 0, 0), 16);
    expect(&st, NtStatus::SUCCESS);
    let spare_mw = out::<WV_IO_ID>(&st).Id;
    let st = ioctl(file, WV_IOCTL_AH_CREATE, &bytes(&ah_in(s.pd)), 64);
    expect(&st, NtStatus::SUCCESS);
    let spare_ah = out::<WV_IO_AH_CREATE>(&st).Id.Id;
    Full {
        guid: fx.guid(),
        dev: s.dev,
        pd: s.pd,
        cq: s.cq,
        srq,
        qp: s.qp,
        ud_qp,
        lkey,
        spare_dev: open_device(fx, file),
        spare_pd: alloc_pd(file, s.dev),
        spare_cq: cq(file, s.dev, 8),
        spare_srq: self::srq(file, s.pd),
        spare_qp: qp(file, s.pd, s.cq, s.cq, 0),
        spare_mw,
        spare_ah,
        spare_lkey,
        ep: ep::ep_create(file),
        spare_ep: ep::ep_create(file),
    }
}

/// A valid request of every one of the 53 codes against [`Full`]: (input, output length).
/// Destroys name the spare objects. Endpoint codes name the Idle endpoint (which most of them
/// then refuse for its state).
pub fn valid_request(code: Ioctl, s: &Full) -> (Vec<u8>, usize) {
    use Ioctl as I;
    let u = u64_in;
    match code {
        I::GuidQuery => (Vec::new(), 24),
        I::LibraryQuery => (u(s.guid), 28),
        I::DeviceOpen => (id(s.guid, 0, 0), 16),
        I::DeviceClose => (u(s.spare_dev), 0),
        I::DeviceQuery => (u(s.dev), size_of::<WV_IO_DEVICE_ATTRIBUTES>()),
        I::DevicePortQuery => (port_in(s.dev, 1), size_of::<WV_IO_PORT_ATTRIBUTES>()),
        I::DeviceGidQuery => (port_in(s.dev, 1), 32),
        I::DevicePkeyQuery => (port_in(s.dev, 1), 4),
        I::DeviceNotify => (id(s.dev, 0, 1), 4),
        I::DeviceCancel => (u(s.dev), 0),
        I::PdAllocate => (id(s.dev, 0, 0), 16),
        I::PdDeallocate => (u(s.spare_pd), 0),
        I::PdCancel => (u(s.pd), 0),
        I::MemoryRegister => (mr_reg_in(s.pd), 8),
        I::MemoryDeregister => (id(s.pd, 0, s.spare_lkey), 0),
        I::MwAllocate => (id(s.pd, 0, 0), 16),
        I::MwDeallocate => (u(s.spare_mw), 0),
        I::AhCreate => (bytes(&ah_in(s.pd)), size_of::<WV_IO_AH_CREATE>()),
        I::AhDestroy => (u(s.spare_ah), 0),
        I::CqCreate => (id(s.dev, 0, 8), 16),
        I::CqDestroy => (u(s.spare_cq), 0),
        I::CqResize => (id(s.cq, 0, 128), 16),
        I::CqNotify => (id(s.cq, 0, 1), 0),
        I::CqCancel => (u(s.cq), 0),
        I::SrqCreate => (bytes(&srq_attr(s.pd, 16, 0)), 32),
        I::SrqDestroy => (u(s.spare_srq), 0),
        I::SrqQuery => (bytes(&srq_attr(s.srq, 0, 0)), 32),
        I::SrqModify => (bytes(&srq_attr(s.srq, 32, 4)), 32),
        I::SrqNotify => (u(s.srq), 0),
        I::SrqCancel => (u(s.srq), 0),
        I::QpCreate => (bytes(&qp_create_in(s.pd, s.cq, s.cq, 0)), 72),
        I::QpDestroy => (u(s.spare_qp), 0),
        I::QpQuery => (u(s.qp), size_of::<WV_IO_QP_ATTRIBUTES>()),
        I::QpModify => (modify_in(s.qp, QpState::Rts), 8),
        I::QpAttach => (mc_in(s.ud_qp, 0xC002), 0),
        I::QpDetach => (mc_in(s.ud_qp, 0xC001), 0),
        I::QpCancel => (u(s.qp), 0),
        I::EpCreate => (u(wv_abi::consts::WV_IO_EP_TYPE_CONNECT), 8),
        I::EpDestroy => (u(s.spare_ep), 0),
        I::EpModify => (route_in(s.ep), 0),
        I::EpBind => (bind_in(s.ep, ipv4(LOCAL, 7000), s.guid), 56),
        I::EpReject => (id(s.ep, 0, 0), 0),
        I::EpConnect => (connect_in(s.ep, s.qp, b""), 0),
        I::EpAccept => (accept_in(s.ep, s.qp, b""), 8),
        I::EpDisconnect => (disconnect_in(s.ep, 0), 0),
        I::EpDisconnectNotify | I::EpCancel => (u(s.ep), 0),
        I::EpQuery => (u(s.ep), size_of::<wv_abi::WV_IO_EP_ATTRIBUTES>()),
        I::EpListen => (listen_in(s.ep, 4), 0),
        I::EpGetRequest => (get_request_in(s.ep, s.spare_ep), 0),
        ep => (vec![0; ep.min_input()], ep.min_output()),
    }
}

/// Issues a request and returns its final status: pending requests get the queued work run,
/// then a CancelIoEx if they are still parked (a notify nobody signals).
pub fn issue(fx: &Fx, file: &WvFile, code: u32, input: &[u8], out_len: usize) -> IoStatus {
    let io = file.device_io_control(code, input, out_len);
    if io.pending() {
        fx.run();
        if !io.is_complete() {
            file.cancel_io_ex(&io);
        }
    }
    done(&io)
}

/// Writes `figures` as `name.txt` (`key=value` lines) into `$WV_FIGURES_DIR`, when set: the
/// numbers `docs/VERIFICATION.md` reports.
pub fn figures(name: &str, figures: &[(&str, u64)]) {
    let Ok(dir) = std::env::var("WV_FIGURES_DIR") else {
        return;
    };
    let text: String = figures.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::create_dir_all(&dir).expect("figures directory");
    std::fs::write(std::path::Path::new(&dir).join(format!("{name}.txt")), text)
        .expect("write figures");
}
