//! Devices and contexts: the device list, `ibv_open_device` (a `verbs_context` with its
//! extended ops in front of the `ibv_context`), the queries, GIDs and P_Keys, async events.

use core::ffi::{c_char, c_int};
use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use wv_client::verbs::Device;

use crate::abi::*;
use crate::errno::{self, EINVAL, ENODEV};
use crate::events::EventQueue;
use crate::runtime::{self, DeviceEntry, File};

/// An open device: the C `verbs_context` first (applications hold `&vctx.context`; the
/// header's inline functions find `vctx` by container_of), then the library's state.
#[repr(C)]
pub struct Context {
    /// The C struct (extended ops, `sz`, then the `ibv_context` applications hold).
    pub vctx: verbs_context,
    /// The open device (DEVICE_OPEN; DEVICE_CLOSE when the context and its objects are gone).
    pub dev: Device<File>,
    /// The device list entry it was opened from.
    pub entry: &'static DeviceEntry,
    /// The async events behind `async_fd`.
    pub async_events: Arc<EventQueue<AsyncEvent>>,
    /// The device's attributes at open (limits for the library's checks).
    pub attr: ibv_device_attr,
    /// Port 1's link layer (`IBV_LINK_LAYER_*`).
    pub link_layer: u8,
    /// Set by `ibv_close_device` for the port-event threads.
    pub closing: Arc<AtomicBool>,
}

/// An async event as queued: the element as an address (or port number) and the type.
#[derive(Clone, Copy, Debug)]
pub struct AsyncEvent {
    /// The CQ, QP or SRQ address, or the port number.
    pub element: usize,
    /// `IBV_EVENT_*`.
    pub event_type: u32,
}

/// The [`Context`] of an `ibv_context` this library made.
///
/// # Safety
/// `ctx` must be a live context returned by [`ibv_open_device`].
pub unsafe fn ctx<'a>(ctx: *mut ibv_context) -> &'a Context {
    let off = core::mem::offset_of!(verbs_context, context);
    // SAFETY: by the contract, `ctx` is the `context` field of the `verbs_context` that starts
    // a boxed `Context` (repr(C), first field), so stepping back `off` bytes is that box.
    unsafe { &*ctx.cast::<u8>().wrapping_sub(off).cast::<Context>() }
}

/// Device list (`ibv_get_device_list`): a NULL-terminated array of the devices, freed with
/// `ibv_free_device_list`. Brings the stack up on the first call.
///
/// # Safety
/// `num` is NULL or writable.
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    let rt = match runtime::get() {
        Ok(rt) => rt,
        Err(_) => {
            errno::set(ENODEV);
            return ptr::null_mut();
        }
    };
    let n = rt.devices.len();
    let mut list: Vec<*mut ibv_device> = rt
        .devices
        .iter()
        .map(|d| ptr::from_ref(&d.c).cast_mut())
        .collect();
    list.push(ptr::null_mut());
    if !num.is_null() {
        // SAFETY: non-null and writable by the contract.
        unsafe { *num = n as c_int };
    }
    Box::into_raw(list.into_boxed_slice()).cast()
}

/// Frees a list from [`ibv_get_device_list`].
///
/// # Safety
/// `list` came from [`ibv_get_device_list`] and is freed once.
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    if list.is_null() {
        return;
    }
    let mut n = 0;
    // SAFETY: the list is NULL-terminated (we built it).
    while unsafe { !list.wrapping_add(n).read().is_null() } {
        n += 1;
    }
    // SAFETY: rebuilds the boxed slice of `n + 1` pointers `ibv_get_device_list` leaked.
    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(list, n + 1)) });
}

/// The device's name (`softhcaN`).
///
/// # Safety
/// `dev` is a device of the list.
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    if dev.is_null() {
        errno::set(EINVAL);
        return ptr::null();
    }
    // SAFETY: a device of our list.
    unsafe { (*dev).name.as_ptr().cast() }
}

/// The node GUID, network order.
///
/// # Safety
/// `dev` is a device of the list.
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    runtime::entry(dev).map_or(0, |e| e.guid)
}

/// The device's index (as the kernel's ibdev index), or -1.
///
/// # Safety
/// `dev` is a device of the list.
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    runtime::entry(dev).map_or(-1, |e| e.index as c_int)
}

/// The context's command descriptor: rdma-core's is the uverbs device file, which does not
/// exist here; applications only pass it around (`dup`, `ibv_import_device`, which answers
/// `EOPNOTSUPP`), so it is an open `/dev/null`, closed with the context.
fn placeholder_fd() -> c_int {
    #[cfg(unix)]
    // SAFETY: opens a path from a C string literal.
    unsafe {
        libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC)
    }
    #[cfg(not(unix))]
    -1
}

fn new_context(entry: &'static DeviceEntry) -> Result<*mut ibv_context, i32> {
    let dev = runtime::open(entry)?;
    let a = dev.query().map_err(|e| errno::of(&e))?;
    let attr = crate::query::device_attr(&a);
    let link_layer = dev
        .query_port(1)
        .map(|p| crate::query::link_layer(&p))
        .unwrap_or(IBV_LINK_LAYER_INFINIBAND);
    let async_events = Arc::new(EventQueue::new()?);
    let ops = crate::ops::context_ops();
    let mut boxed = Box::new(Context {
        vctx: crate::ops::verbs_context_ops(ibv_context {
            device: ptr::from_ref(&entry.c).cast_mut(),
            ops,
            cmd_fd: placeholder_fd(),
            async_fd: async_events.fd(),
            num_comp_vectors: 1,
            mutex: pthread_mutex_t([0; 40]),
            abi_compat: VERBS_ABI_IS_EXTENDED,
        }),
        dev,
        entry,
        async_events,
        attr,
        link_layer,
        closing: Arc::new(AtomicBool::new(false)),
    });
    boxed.vctx.sz = core::mem::size_of::<verbs_context>();
    for port in 1..=boxed.attr.phys_port_cnt {
        watch_port(
            &boxed.dev,
            port,
            boxed.async_events.clone(),
            boxed.closing.clone(),
        );
    }
    let raw = Box::into_raw(boxed);
    // SAFETY: `raw` is the live box just leaked.
    Ok(unsafe { &raw mut (*raw).vctx.context })
}

/// The port's async events: a thread parks DEVICE_NOTIFY for `port` (WinVerbs' port event
/// request, as WinOFED's libibverbs parks it for `ibv_get_async_event`) and turns each
/// completion's `WV_IO_EVENT_*` flags into rdma-core's events: a state change into
/// `IBV_EVENT_PORT_ACTIVE` or `IBV_EVENT_PORT_ERR` (by the port's state now), an address change
/// into `IBV_EVENT_GID_CHANGE`, a partition change into `IBV_EVENT_PKEY_CHANGE`, a management
/// change into `IBV_EVENT_SM_CHANGE`, a device error into `IBV_EVENT_DEVICE_FATAL`. The thread
/// ends when the request ends otherwise (DEVICE_CANCEL at close, removal).
fn watch_port(
    dev: &Device<File>,
    port: u8,
    events: Arc<EventQueue<AsyncEvent>>,
    closing: Arc<AtomicBool>,
) {
    use wv_client::verbs::{
        WV_IO_EVENT_ADDRESS, WV_IO_EVENT_ERROR, WV_IO_EVENT_LINK_ADDRESS, WV_IO_EVENT_MANAGEMENT,
        WV_IO_EVENT_PARTITION, WV_IO_EVENT_STATE,
    };
    let dev = dev.clone();
    let _ = std::thread::Builder::new()
        .name("ibv-port-events".into())
        .spawn(move || {
            loop {
                let Ok(p) = dev.port_notify(port) else { return };
                // Parked before the close's DEVICE_CANCEL, it ends with it; parked after, the
                // flag (set before the cancel) is seen here.
                if closing.load(Ordering::SeqCst) {
                    p.cancel();
                    return;
                }
                let Ok(flags) = p.wait() else { return };
                let element = usize::from(port);
                let push = |event_type| {
                    events.push(AsyncEvent {
                        element,
                        event_type,
                    })
                };
                if flags & WV_IO_EVENT_ERROR != 0 {
                    push(IBV_EVENT_DEVICE_FATAL);
                }
                if flags & WV_IO_EVENT_STATE != 0 {
                    let active = dev
                        .query_port(port)
                        .is_ok_and(|a| a.State == IBV_PORT_ACTIVE);
                    push(if active {
                        IBV_EVENT_PORT_ACTIVE
                    } else {
                        IBV_EVENT_PORT_ERR
                    });
                }
                if flags & (WV_IO_EVENT_ADDRESS | WV_IO_EVENT_LINK_ADDRESS) != 0 {
                    push(IBV_EVENT_GID_CHANGE);
                }
                if flags & WV_IO_EVENT_PARTITION != 0 {
                    push(IBV_EVENT_PKEY_CHANGE);
                }
                if flags & WV_IO_EVENT_MANAGEMENT != 0 {
                    push(IBV_EVENT_SM_CHANGE);
                }
            }
        });
}

/// Opens a device (`ibv_open_device`): DEVICE_OPEN through the driver, the user-mode
/// provider mapped; NULL with `errno` on failure.
///
/// # Safety
/// `dev` is a device of the list.
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    let r = match runtime::entry(dev) {
        Some(e) => new_context(e),
        None => Err(ENODEV),
    };
    errno::ret_ptr(r)
}

/// Closes a context; its objects must have been destroyed first (those still alive leak, as
/// the kernel would clean them up at close).
///
/// # Safety
/// `c` came from [`ibv_open_device`] and is closed once.
pub unsafe extern "C" fn ibv_close_device(c: *mut ibv_context) -> c_int {
    if c.is_null() {
        return errno::ret(Err(EINVAL));
    }
    let off = core::mem::offset_of!(verbs_context, context);
    // SAFETY: the box `new_context` leaked (see `ctx`).
    let cx = unsafe { Box::from_raw(c.cast::<u8>().wrapping_sub(off).cast::<Context>()) };
    // The port threads' DEVICE_NOTIFYs end (cancelled): they let their device handles go.
    cx.closing.store(true, Ordering::SeqCst);
    let _ = cx.dev.cancel_notify();
    #[cfg(unix)]
    if cx.vctx.context.cmd_fd >= 0 {
        // SAFETY: the context's own descriptor.
        unsafe { libc::close(cx.vctx.context.cmd_fd) };
    }
    drop(cx);
    0
}

/// `ibv_query_device`.
///
/// # Safety
/// `c` is a live context, `attr` writable.
pub unsafe extern "C" fn ibv_query_device(
    c: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    if c.is_null() || attr.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live context by the contract.
    let cx = unsafe { ctx(c) };
    let r = cx.dev.query().map(|a| {
        // SAFETY: writable by the contract.
        unsafe { *attr = crate::query::device_attr(&a) };
    });
    errno::ret(r.map_err(|e| errno::of(&e)))
}

/// `query_device_ex` of the extended ops (what `ibv_query_device_ex` calls): the basic
/// attributes and zeroed extensions (no ODP, TSO, RSS, packet pacing, tag matching, DM).
///
/// # Safety
/// `c` is a live context; `attr` holds `attr_size` writable bytes.
pub unsafe extern "C" fn query_device_ex(
    c: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    if c.is_null() || attr.is_null() || attr_size < core::mem::size_of::<ibv_device_attr>() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: readable when non-null, by the contract.
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    let a = match cx.dev.query() {
        Ok(a) => a,
        Err(e) => return errno::ret(Err(errno::of(&e))),
    };
    // SAFETY: all-zero is a valid ibv_device_attr_ex (integers and arrays).
    let mut ex: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
    ex.orig_attr = crate::query::device_attr(&a);
    ex.phys_port_cnt_ex = u32::from(ex.orig_attr.phys_port_cnt);
    let n = attr_size.min(core::mem::size_of::<ibv_device_attr_ex>());
    // SAFETY: copies `n` bytes of `ex` into the caller's `attr_size` writable bytes.
    unsafe { ptr::copy_nonoverlapping((&raw const ex).cast::<u8>(), attr.cast::<u8>(), n) };
    0
}

/// rdma-core's `struct _compat_ibv_port_attr` (what the exported `ibv_query_port` takes): the
/// fields of `ibv_port_attr` up to `flags`, without `port_cap_flags2`.
const COMPAT_PORT_ATTR_SIZE: usize = core::mem::offset_of!(ibv_port_attr, port_cap_flags2);
const _: () = assert!(COMPAT_PORT_ATTR_SIZE == 48);

/// `ibv_query_port` (the exported 1.1 entry point, for callers that do not go through the
/// header's inline function): it fills rdma-core's 48-byte `_compat_ibv_port_attr`.
///
/// # Safety
/// `c` is a live context, `attr` holds 48 writable bytes.
pub unsafe extern "C" fn ibv_query_port(
    c: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: forwarded contract, with the compat struct's size.
    unsafe { query_port_ex(c, port, attr, COMPAT_PORT_ATTR_SIZE) }
}

/// `query_port` of the extended ops (what the header's inline `ibv_query_port` calls).
///
/// # Safety
/// `c` is a live context; `attr` holds `len` writable bytes.
pub unsafe extern "C" fn query_port_ex(
    c: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    if c.is_null() || attr.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    if port == 0 || port > cx.attr.phys_port_cnt {
        return errno::ret(Err(EINVAL));
    }
    match cx.dev.query_port(port) {
        Ok(p) => {
            let a = crate::query::port_attr(&p);
            let n = len.min(core::mem::size_of::<ibv_port_attr>());
            // SAFETY: `n` bytes fit the caller's buffer.
            unsafe { ptr::copy_nonoverlapping((&raw const a).cast::<u8>(), attr.cast::<u8>(), n) };
            0
        }
        Err(e) => errno::ret(Err(errno::of(&e))),
    }
}

fn port_gids(cx: &Context, port: u8) -> Result<Vec<[u8; 16]>, i32> {
    if port == 0 || port > cx.attr.phys_port_cnt {
        return Err(EINVAL);
    }
    cx.dev.query_gids(port).map_err(|e| errno::of(&e))
}

/// `ibv_query_gid`.
///
/// # Safety
/// `c` is a live context, `gid` writable.
pub unsafe extern "C" fn ibv_query_gid(
    c: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    if c.is_null() || gid.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    let r = port_gids(cx, port).and_then(|t| {
        let g = usize::try_from(index)
            .ok()
            .and_then(|i| t.get(i))
            .ok_or(EINVAL)?;
        // SAFETY: writable by the contract.
        unsafe { gid.write(ibv_gid { raw: *g }) };
        Ok(())
    });
    // rdma-core answers -1 for a failed sysfs read of the GID.
    match r {
        Ok(()) => 0,
        Err(e) => {
            errno::set(e);
            -1
        }
    }
}

/// The GID type of a port (`IBV_GID_TYPE_*`: RoCE ports carry RoCE v1 GIDs).
fn gid_type(cx: &Context) -> u32 {
    if cx.link_layer == IBV_LINK_LAYER_ETHERNET {
        IBV_GID_TYPE_ROCE_V1
    } else {
        IBV_GID_TYPE_IB
    }
}

/// `_ibv_query_gid_ex` (what the inline `ibv_query_gid_ex` calls).
///
/// # Safety
/// `c` is a live context; `entry` holds `entry_size` writable bytes.
pub unsafe extern "C" fn _ibv_query_gid_ex(
    c: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    if c.is_null()
        || entry.is_null()
        || flags != 0
        || entry_size < core::mem::size_of::<ibv_gid_entry>()
    {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    let r = u8::try_from(port)
        .map_err(|_| EINVAL)
        .and_then(|p| port_gids(cx, p))
        .and_then(|t| {
            let g = t.get(index as usize).ok_or(EINVAL)?;
            if *g == [0; 16] {
                return Err(errno::ENODATA);
            }
            // SAFETY: writable by the contract.
            unsafe {
                *entry = ibv_gid_entry {
                    gid: ibv_gid { raw: *g },
                    gid_index: index,
                    port_num: port,
                    gid_type: gid_type(cx),
                    ndev_ifindex: 0,
                }
            };
            Ok(())
        });
    errno::ret(r)
}

/// `_ibv_query_gid_table`: every valid GID of every port; the count or a negative errno.
///
/// # Safety
/// `c` is a live context; `entries` holds `max` entries of `entry_size` bytes.
pub unsafe extern "C" fn _ibv_query_gid_table(
    c: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    if c.is_null() || flags != 0 || entry_size < core::mem::size_of::<ibv_gid_entry>() {
        return -(EINVAL as isize);
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    let mut n = 0usize;
    for port in 1..=cx.attr.phys_port_cnt {
        let t = match port_gids(cx, port) {
            Ok(t) => t,
            Err(e) => return -(e as isize),
        };
        for (i, g) in t.iter().enumerate() {
            if *g == [0; 16] {
                continue;
            }
            if n >= max {
                return -(EINVAL as isize);
            }
            let e = ibv_gid_entry {
                gid: ibv_gid { raw: *g },
                gid_index: i as u32,
                port_num: u32::from(port),
                gid_type: gid_type(cx),
                ndev_ifindex: 0,
            };
            // SAFETY: entry `n < max` of the caller's array of `entry_size`-byte entries.
            unsafe {
                entries
                    .cast::<u8>()
                    .wrapping_add(n * entry_size)
                    .cast::<ibv_gid_entry>()
                    .write_unaligned(e)
            };
            n += 1;
        }
    }
    n as isize
}

/// `ibv_query_gid_type` (private): the sysfs GID type of an entry.
///
/// # Safety
/// `c` is a live context, `gid_type` writable.
pub unsafe extern "C" fn ibv_query_gid_type(
    c: *mut ibv_context,
    port: u8,
    index: u32,
    out: *mut u32,
) -> c_int {
    if c.is_null() || out.is_null() {
        return EINVAL;
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    match port_gids(cx, port) {
        Ok(t) if (index as usize) < t.len() => {
            // SAFETY: writable by the contract. Both link layers answer "IB/RoCE v1".
            unsafe { *out = IBV_GID_TYPE_SYSFS_IB_ROCE_V1 };
            0
        }
        Ok(_) => EINVAL,
        Err(e) => e,
    }
}

/// `ibv_query_pkey` (`pkey` in network order, as rdma-core returns it).
///
/// # Safety
/// `c` is a live context, `pkey` writable.
pub unsafe extern "C" fn ibv_query_pkey(
    c: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if c.is_null() || pkey.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    if port == 0 || port > cx.attr.phys_port_cnt {
        errno::set(EINVAL);
        return -1;
    }
    match cx.dev.query_pkeys(port) {
        Ok(t) => match usize::try_from(index).ok().and_then(|i| t.get(i)) {
            Some(k) => {
                // SAFETY: writable by the contract.
                unsafe { *pkey = k.to_be() };
                0
            }
            None => {
                errno::set(EINVAL);
                -1
            }
        },
        Err(e) => {
            errno::set(errno::of(&e));
            -1
        }
    }
}

/// `ibv_get_pkey_index`: the index of `pkey` (network order) in the port's table, or -1.
///
/// # Safety
/// `c` is a live context.
pub unsafe extern "C" fn ibv_get_pkey_index(c: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    if c.is_null() {
        return -1;
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    match cx.dev.query_pkeys(port) {
        Ok(t) => t
            .iter()
            .position(|&k| k == u16::from_be(pkey))
            .map_or(-1, |i| i as c_int),
        Err(_) => -1,
    }
}

/// `ibv_get_async_event`: blocks for the context's next async event (unless its `async_fd` is
/// non-blocking); 0, or -1 with `errno`.
///
/// # Safety
/// `c` is a live context, `event` writable.
pub unsafe extern "C" fn ibv_get_async_event(
    c: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    if c.is_null() || event.is_null() {
        return errno::ret_minus1(Err(EINVAL));
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    match cx.async_events.pop() {
        Ok(e) => {
            let element = if matches!(
                e.event_type,
                IBV_EVENT_PORT_ACTIVE
                    | IBV_EVENT_PORT_ERR
                    | IBV_EVENT_GID_CHANGE
                    | IBV_EVENT_PKEY_CHANGE
                    | IBV_EVENT_SM_CHANGE
                    | IBV_EVENT_DEVICE_FATAL
            ) {
                ibv_async_event_element {
                    port_num: e.element as i32,
                }
            } else {
                ibv_async_event_element {
                    qp: e.element as *mut ibv_qp,
                }
            };
            // SAFETY: writable by the contract.
            unsafe {
                *event = ibv_async_event {
                    element,
                    event_type: e.event_type,
                }
            };
            0
        }
        Err(e) => errno::ret_minus1(Err(e)),
    }
}

/// `ibv_ack_async_event`: events hold nothing in this library, so acking only counts (the
/// object's `events_completed`, which a destroy would wait for in rdma-core).
///
/// # Safety
/// `event` came from [`ibv_get_async_event`].
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    if event.is_null() {
        return;
    }
    // SAFETY: an event from `ibv_get_async_event`, readable.
    let ev = unsafe { event.read() };
    match ev.event_type {
        IBV_EVENT_CQ_ERR => {
            // SAFETY: a CQ event's element is its CQ.
            let cq = unsafe { ev.element.cq };
            if !cq.is_null() {
                // SAFETY: the event names a live CQ.
                let cq = unsafe { &mut *cq };
                cq.async_events_completed = cq.async_events_completed.wrapping_add(1);
            }
        }
        IBV_EVENT_SRQ_ERR | IBV_EVENT_SRQ_LIMIT_REACHED => {
            // SAFETY: an SRQ event's element is its SRQ.
            let srq = unsafe { ev.element.srq };
            if !srq.is_null() {
                // SAFETY: the event names a live SRQ.
                let srq = unsafe { &mut *srq };
                srq.events_completed = srq.events_completed.wrapping_add(1);
            }
        }
        IBV_EVENT_PORT_ACTIVE | IBV_EVENT_PORT_ERR | IBV_EVENT_GID_CHANGE | 8 | 11..=13 | 17 => {}
        _ => {
            // SAFETY: the remaining events are a QP's.
            let qp = unsafe { ev.element.qp };
            if !qp.is_null() {
                // SAFETY: the event names a live QP.
                let qp = unsafe { &mut *qp };
                qp.events_completed = qp.events_completed.wrapping_add(1);
            }
        }
    }
}
