//! A tiny `FilterDriver` for the host model's own tests: each test gives the IOCTL handler as a
//! closure; every file owns one manual queue that cleanup purges.
#![allow(dead_code, missing_docs)]

use std::sync::{Arc, Mutex};

use wv_abi::NtStatus;
use wv_hal::KArc;
use wv_hal::{FilterDriver, Irql, Platform, RequestQueue};
use wv_host::fake_verbs::FakeVerbs;
use wv_host::{File, HostPlatform, HostQueue, HostRequest, IoManager};

pub type Handler = dyn Fn(&TestDriver, &TestFile, HostRequest) + Send + Sync;

pub struct TestDriver {
    pub platform: HostPlatform,
    pub handler: Box<Handler>,
    /// "create n", "cleanup n", "close n", "arrival", "removal", each with the IRQL seen.
    pub log: Mutex<Vec<String>>,
    pub lower: Mutex<Option<KArc<Arc<FakeVerbs>>>>,
    next: Mutex<u32>,
}

pub struct TestFile {
    pub n: u32,
    pub queue: HostQueue,
}

impl TestDriver {
    pub fn new(
        platform: &HostPlatform,
        handler: impl Fn(&TestDriver, &TestFile, HostRequest) + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(TestDriver {
            platform: platform.clone(),
            handler: Box::new(handler),
            log: Mutex::new(Vec::new()),
            lower: Mutex::new(None),
            next: Mutex::new(0),
        })
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn note(&self, what: String) {
        assert_eq!(
            self.platform.irql(),
            Irql::Passive,
            "{what} not at PASSIVE_LEVEL"
        );
        self.log.lock().unwrap().push(what);
    }
}

impl FilterDriver<HostPlatform> for TestDriver {
    type Lower = Arc<FakeVerbs>;
    type File = TestFile;

    fn device_arrival(
        &self,
        lower: KArc<Arc<FakeVerbs>>,
        _cm: Option<KArc<Arc<wv_host::fake_cm::FakeCm>>>,
    ) -> Result<(), NtStatus> {
        self.note("arrival".into());
        *self.lower.lock().unwrap() = Some(lower);
        Ok(())
    }

    fn device_removal(&self, _guid: u64) {
        self.note("removal".into());
        *self.lower.lock().unwrap() = None;
    }

    fn file_create(&self) -> Result<TestFile, NtStatus> {
        let n = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            *next
        };
        self.note(format!("create {n}"));
        Ok(TestFile {
            n,
            queue: self.platform.create_queue()?,
        })
    }

    fn file_cleanup(&self, file: &TestFile) {
        self.note(format!("cleanup {}", file.n));
        file.queue.purge();
    }

    fn file_close(&self, file: TestFile) {
        self.note(format!("close {}", file.n));
    }

    fn device_io_control(&self, file: &TestFile, request: HostRequest) {
        assert_eq!(self.platform.irql(), Irql::Passive);
        (self.handler)(self, file, request);
    }
}

/// IOCTL codes the standard handler understands.
pub const COMPLETE_INLINE: u32 = 1;
pub const PARK: u32 = 2;
/// Completes every parked request of the file with STATUS_SUCCESS, then itself.
pub const FIRE: u32 = 3;
/// Completes inline with the status in the first 4 input bytes (LE), Information = output_len,
/// after writing 0xAB over the whole output.
pub const STATUS_FROM_INPUT: u32 = 4;

/// The standard handler: the codes above.
pub fn standard(_d: &TestDriver, file: &TestFile, mut request: HostRequest) {
    use wv_hal::IoRequest;
    match request.ioctl_code() {
        COMPLETE_INLINE => {
            let n = request.output_len();
            for b in &mut request.buffer_mut()[..n] {
                *b = b.wrapping_add(1);
            }
            request.complete(NtStatus::SUCCESS, n);
        }
        PARK => {
            if let Err((request, status)) = file.queue.park(request) {
                request.complete(status, 0);
            }
        }
        FIRE => {
            while let Some(parked) = file.queue.retrieve_next() {
                parked.complete(NtStatus::SUCCESS, 0);
            }
            request.complete(NtStatus::SUCCESS, 0);
        }
        STATUS_FROM_INPUT => {
            let status = u32::from_le_bytes(request.buffer()[..4].try_into().unwrap());
            let n = request.output_len();
            request.buffer_mut()[..n].fill(0xAB);
            request.complete(NtStatus(status), n);
        }
        _ => request.complete(NtStatus::INVALID_DEVICE_REQUEST, 0),
    }
}

/// A deterministic platform, the standard driver on it and one file open on that driver
/// (declared in that order, so the file goes first when they are dropped).
pub fn open_one() -> (HostPlatform, IoManager<TestDriver>, File<TestDriver>) {
    let p = HostPlatform::deterministic();
    let mgr = manager(&p);
    let file = mgr.open().unwrap();
    (p, mgr, file)
}

pub fn manager(platform: &HostPlatform) -> IoManager<TestDriver> {
    IoManager::new(platform.clone(), TestDriver::new(platform, standard))
}

pub fn manager_with(
    platform: &HostPlatform,
    handler: impl Fn(&TestDriver, &TestFile, HostRequest) + Send + Sync + 'static,
) -> IoManager<TestDriver> {
    IoManager::new(platform.clone(), TestDriver::new(platform, handler))
}

/// A bounded wait used only as a hang guard.
pub const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(30);
