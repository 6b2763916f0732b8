//! Interrupt request levels, the part of them the driver cares about.

/// The IRQL a piece of code runs at. Ordered: `Passive < Apc < Dispatch < Device`.
///
/// The rules the host model enforces follow the kernel's: nothing may block or touch pageable
/// memory at `Dispatch` or above; spin locks raise to `Dispatch`; work items run at `Passive`;
/// DPCs run at `Dispatch`; interrupt service routines run at `Device` (DIRQL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Irql {
    /// PASSIVE_LEVEL (0): threads, IOCTL dispatch in the caller's context, work items.
    Passive = 0,
    /// APC_LEVEL (1): guarded mutexes; not used by the core.
    Apc = 1,
    /// DISPATCH_LEVEL (2): DPCs, code holding a spin lock.
    Dispatch = 2,
    /// A device IRQL (DIRQL): interrupt service routines.
    Device = 3,
}

impl Irql {
    /// The C name of the level, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Irql::Passive => "PASSIVE_LEVEL",
            Irql::Apc => "APC_LEVEL",
            Irql::Dispatch => "DISPATCH_LEVEL",
            Irql::Device => "DIRQL",
        }
    }
}
