//! Fault injection: every call of the driver that can fail for want of resources — each
//! fallible WDF call (`WdfDriverCreate`, `WdfDeviceCreate`, `WdfIoQueueCreate`,
//! `WdfFdoQueryForInterface`, …) and each kernel allocation (`ExAllocatePool2`,
//! `IoAllocateWorkItem`) — is a site. A run under [`FaultPlan::Count`] lists the sites the
//! driver reaches, in order; a run under [`FaultPlan::FailNth`] fails exactly that one, the
//! way the framework and the kernel fail it when memory is short (a null pointer,
//! `STATUS_INSUFFICIENT_RESOURCES`, or the DDI's documented refusal). The driver's own Rust
//! allocations are `wv-host`'s low-resources allocator's business.

use parking_lot::Mutex;

/// What the injector does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPlan {
    /// Nothing.
    Off,
    /// Counts the sites; fails none.
    Count,
    /// Fails the N-th site (1-based), counts the rest.
    FailNth(usize),
}

#[derive(Debug)]
struct State {
    plan: FaultPlan,
    seen: Vec<&'static str>,
    failed: Option<(usize, &'static str)>,
}

/// The machine's fault injector.
#[derive(Debug)]
pub struct Faults {
    state: Mutex<State>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            state: Mutex::new(State {
                plan: FaultPlan::Off,
                seen: Vec::new(),
                failed: None,
            }),
        }
    }
}

impl Faults {
    /// Arms `plan` and clears what was seen.
    pub fn arm(&self, plan: FaultPlan) {
        let mut state = self.state.lock();
        state.plan = plan;
        state.seen.clear();
        state.failed = None;
    }

    /// Disarms; returns the sites seen, in order.
    pub fn disarm(&self) -> Vec<&'static str> {
        let mut state = self.state.lock();
        state.plan = FaultPlan::Off;
        std::mem::take(&mut state.seen)
    }

    /// The site the plan failed, with its number, if it did.
    pub fn failed(&self) -> Option<(usize, &'static str)> {
        self.state.lock().failed
    }

    /// Whether the call at `site` fails now.
    pub(crate) fn fail(&self, site: &'static str) -> bool {
        let mut state = self.state.lock();
        if state.plan == FaultPlan::Off {
            return false;
        }
        state.seen.push(site);
        let n = state.seen.len();
        if state.plan == FaultPlan::FailNth(n) {
            state.failed = Some((n, site));
            return true;
        }
        false
    }
}
