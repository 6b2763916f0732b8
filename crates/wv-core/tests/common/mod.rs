//! A small DSL over the host model for the core's tests: raw IOCTL bytes in, `IoStatus` out.
#![allow(dead_code, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use wv_abi::ioctl::*;
use wv_abi::{
    NtStatus, WV_IO_AH_CREATE, WV_IO_ID, WV_IO_QP_ATTRIBUTES, WV_IO_QP_CREATE,
    WV_IO_SRQ_ATTRIBUTES, read_prefix,
};
use wv_core::{Driver, DriverConfig};
use wv_hal::{FilterDriver, QpState};
use wv_host::fake_verbs::{FakeCall, FakeConfig, FakeVerbs};
use wv_host::{File, HostPlatform, HostRequest, Io, IoManager, IoStatus};
use zerocopy::{Immutable, IntoBytes};

pub type Drv = Driver<HostPlatform, FakeVerbs>;
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

/// One driver on one platform with one fake HCA.
pub struct Fx {
    pub io: IoManager<Drv>,
    pub hca: Arc<FakeVerbs>,
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

    pub fn with(platform: HostPlatform, config: DriverConfig) -> Fx {
        Fx::with_hca(platform, config, FakeConfig::default())
    }

    pub fn with_hca(platform: HostPlatform, config: DriverConfig, hca: FakeConfig) -> Fx {
        let hca = FakeVerbs::new(&platform, hca);
        let driver = Arc::new(Driver::new(platform.clone(), config));
        let io = IoManager::new(platform, driver);
        io.arrive(Arc::clone(&hca)).expect("arrival");
        Fx { io, hca }
    }

    pub fn platform(&self) -> &HostPlatform {
        self.io.platform()
    }

    pub fn driver(&self) -> &Arc<Drv> {
        self.io.driver()
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

pub fn bytes<T: IntoBytes + Immutable>(value: &T) -> Vec<u8> {
    value.as_bytes().to_vec()
}

pub fn id(id: u64, verb_info: u32, data: u32) -> Vec<u8> {
    bytes(&WV_IO_ID {
        Id: id,
        VerbInfo: verb_info,
        Data: data,
    })
}

pub fn u64_in(value: u64) -> Vec<u8> {
    value.to_ne_bytes().to_vec()
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
        Id: WV_IO_ID {
            Id: id,
            VerbInfo: 0,
            Data: 0,
        },
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

pub fn qp_create_in(pd: u64, scq: u64, rcq: u64, srq: u64) -> WV_IO_QP_CREATE {
    WV_IO_QP_CREATE {
        Id: WV_IO_ID {
            Id: pd,
            VerbInfo: 0,
            Data: 0,
        },
        SendCqId: scq,
        ReceiveCqId: rcq,
        SrqId: srq,
        SendDepth: 16,
        SendSge: 1,
        ReceiveDepth: 16,
        ReceiveSge: 1,
        MaxInlineSend: 0,
        InitiatorDepth: 1,
        ResponderResources: 1,
        QpType: 0,
        QpFlags: 1,
        Reserved: 0,
    }
}

pub fn qp(file: &WvFile, pd: u64, scq: u64, rcq: u64, srq: u64) -> u64 {
    let st = ioctl(
        file,
        WV_IOCTL_QP_CREATE,
        &bytes(&qp_create_in(pd, scq, rcq, srq)),
        72,
    );
    expect(&st, NtStatus::SUCCESS);
    out::<WV_IO_QP_CREATE>(&st).Id.Id
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

pub fn qp_rts(fx: &Fx, file: &WvFile) -> Stack {
    let dev = open_device(fx, file);
    let pd = alloc_pd(file, dev);
    let cq = cq(file, dev, 64);
    let qp = qp(file, pd, cq, cq, 0);
    for to in [QpState::Init, QpState::Rtr, QpState::Rts] {
        expect(&modify(file, qp, to), NtStatus::SUCCESS);
    }
    Stack { dev, pd, cq, qp }
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
