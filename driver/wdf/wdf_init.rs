//! `const` Rust equivalents of the KMDF `WDF_*_INIT` helpers.
//!
//! The WDK defines these as `FORCEINLINE` C functions, which bindgen does not generate, and the
//! wdk crates (0.5) offer no replacement. `Default::default()` zero-fills, which is wrong for
//! several members a filter depends on: a zero `ExecutionLevel`/`SynchronizationScope` is the
//! *Invalid* value, a parallel queue with `NumberOfPresentedRequests == 0` never presents a
//! request, and `AutoForwardCleanupClose == WdfFalse` stops the framework forwarding create,
//! cleanup and close down the stack. Each function below does what its C namesake does
//! (zero, `Size`, then the documented non-zero defaults); the names keep the C spelling in
//! lower case so that a reader can look the C helper up.
//!
//! Self-contained on purpose (only `wdk_sys` types): the kmdf-check probe compiles this very
//! file too.
//! The `const` block at the end evaluates every helper at compile time and checks the defaults.

use core::mem::size_of;

use wdk_sys::{
    _WDF_EXECUTION_LEVEL, _WDF_FILEOBJECT_CLASS, _WDF_IO_QUEUE_DISPATCH_TYPE,
    _WDF_SYNCHRONIZATION_SCOPE, _WDF_TRI_STATE, BOOLEAN, PCWDF_OBJECT_CONTEXT_TYPE_INFO,
    PFN_WDF_DEVICE_FILE_CREATE, PFN_WDF_DPC, PFN_WDF_DRIVER_DEVICE_ADD, PFN_WDF_FILE_CLEANUP,
    PFN_WDF_FILE_CLOSE, PFN_WDF_TIMER, PFN_WDF_WORKITEM, ULONG, USHORT, WDF_DPC_CONFIG,
    WDF_DRIVER_CONFIG, WDF_FILEOBJECT_CONFIG, WDF_IO_QUEUE_CONFIG, WDF_IO_QUEUE_DISPATCH_TYPE,
    WDF_OBJECT_ATTRIBUTES, WDF_PNPPOWER_EVENT_CALLBACKS, WDF_REQUEST_PARAMETERS, WDF_TIMER_CONFIG,
    WDF_WORKITEM_CONFIG,
};

/// `TRUE` as the `BOOLEAN` (u8) the WDF structures use.
pub const WDF_TRUE: BOOLEAN = 1;

/// `WDF_STRUCTURE_SIZE(T)`: `sizeof(T)` as the `ULONG` every `Size` member takes.
#[must_use]
pub const fn wdf_structure_size<T>() -> ULONG {
    let size = size_of::<T>();
    assert!(size <= ULONG::MAX as usize);
    #[allow(
        clippy::cast_possible_truncation,
        reason = "checked against ULONG::MAX on the line above"
    )]
    let size = size as ULONG;
    size
}

/// An all-zero value of a WDF configuration structure: what `RtlZeroMemory` leaves before the
/// C helpers fill in `Size` and the defaults.
macro_rules! zeroed {
    ($type:ty) => {{
        // SAFETY: every WDF configuration structure built here consists of integers, raw
        // pointers, `Option` of function pointers and unions of those, for all of which the
        // all-zero bit pattern is a valid value (null / None / 0) -- the state RtlZeroMemory
        // produces in the C helpers.
        let value: $type = unsafe { core::mem::zeroed() };
        value
    }};
}

/// `WDF_DRIVER_CONFIG_INIT(&config, EvtDriverDeviceAdd)`.
#[must_use]
pub const fn wdf_driver_config_init(
    evt_driver_device_add: PFN_WDF_DRIVER_DEVICE_ADD,
) -> WDF_DRIVER_CONFIG {
    let mut config = zeroed!(WDF_DRIVER_CONFIG);
    config.Size = wdf_structure_size::<WDF_DRIVER_CONFIG>();
    config.EvtDriverDeviceAdd = evt_driver_device_add;
    config
}

/// `WDF_OBJECT_ATTRIBUTES_INIT(&attributes)`: execution level and synchronization scope are
/// inherited from the parent (zero would be the *Invalid* values).
#[must_use]
pub const fn wdf_object_attributes_init() -> WDF_OBJECT_ATTRIBUTES {
    let mut attributes = zeroed!(WDF_OBJECT_ATTRIBUTES);
    attributes.Size = wdf_structure_size::<WDF_OBJECT_ATTRIBUTES>();
    attributes.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent;
    attributes.SynchronizationScope =
        _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent;
    attributes
}

/// `WDF_OBJECT_ATTRIBUTES_INIT_CONTEXT_TYPE(&attributes, Type)`: the attributes above plus the
/// context type the object gets (see `context.rs` for declaring one).
#[must_use]
pub const fn wdf_object_attributes_init_context_type(
    context_type_info: PCWDF_OBJECT_CONTEXT_TYPE_INFO,
) -> WDF_OBJECT_ATTRIBUTES {
    let mut attributes = wdf_object_attributes_init();
    attributes.ContextTypeInfo = context_type_info;
    attributes
}

/// `WDF_PNPPOWER_EVENT_CALLBACKS_INIT(&callbacks)`: no callbacks, only `Size`.
#[must_use]
pub const fn wdf_pnppower_event_callbacks_init() -> WDF_PNPPOWER_EVENT_CALLBACKS {
    let mut callbacks = zeroed!(WDF_PNPPOWER_EVENT_CALLBACKS);
    callbacks.Size = wdf_structure_size::<WDF_PNPPOWER_EVENT_CALLBACKS>();
    callbacks
}

/// `WDF_FILEOBJECT_CONFIG_INIT(&config, EvtDeviceFileCreate, EvtFileClose, EvtFileCleanup)`:
/// `FileObjectClass = WdfFileObjectWdfCannotUseFsContexts` and
/// `AutoForwardCleanupClose = WdfUseDefault` (a filter must not stop forwarding).
#[must_use]
pub const fn wdf_fileobject_config_init(
    evt_device_file_create: PFN_WDF_DEVICE_FILE_CREATE,
    evt_file_close: PFN_WDF_FILE_CLOSE,
    evt_file_cleanup: PFN_WDF_FILE_CLEANUP,
) -> WDF_FILEOBJECT_CONFIG {
    let mut config = zeroed!(WDF_FILEOBJECT_CONFIG);
    config.Size = wdf_structure_size::<WDF_FILEOBJECT_CONFIG>();
    config.EvtDeviceFileCreate = evt_device_file_create;
    config.EvtFileClose = evt_file_close;
    config.EvtFileCleanup = evt_file_cleanup;
    config.FileObjectClass = _WDF_FILEOBJECT_CLASS::WdfFileObjectWdfCannotUseFsContexts;
    config.AutoForwardCleanupClose = _WDF_TRI_STATE::WdfUseDefault;
    config
}

/// `WDF_IO_QUEUE_CONFIG_INIT(&config, DispatchType)`: `PowerManaged = WdfUseDefault`, and for a
/// parallel queue `Settings.Parallel.NumberOfPresentedRequests = (ULONG)-1` (no limit; zero
/// would present nothing).
#[must_use]
pub const fn wdf_io_queue_config_init(
    dispatch_type: WDF_IO_QUEUE_DISPATCH_TYPE,
) -> WDF_IO_QUEUE_CONFIG {
    let mut config = zeroed!(WDF_IO_QUEUE_CONFIG);
    config.Size = wdf_structure_size::<WDF_IO_QUEUE_CONFIG>();
    config.PowerManaged = _WDF_TRI_STATE::WdfUseDefault;
    config.DispatchType = dispatch_type;
    if dispatch_type == _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel {
        config.Settings.Parallel.NumberOfPresentedRequests = ULONG::MAX;
    }
    config
}

/// `WDF_IO_QUEUE_CONFIG_INIT_DEFAULT_QUEUE(&config, DispatchType)`: the above with
/// `DefaultQueue = TRUE`.
#[must_use]
pub const fn wdf_io_queue_config_init_default_queue(
    dispatch_type: WDF_IO_QUEUE_DISPATCH_TYPE,
) -> WDF_IO_QUEUE_CONFIG {
    let mut config = wdf_io_queue_config_init(dispatch_type);
    config.DefaultQueue = WDF_TRUE;
    config
}

/// `WDF_WORKITEM_CONFIG_INIT(&config, EvtWorkItemFunc)`: `AutomaticSerialization = TRUE`. With
/// that, the parent object must have `WdfExecutionLevelPassive` or creation fails
/// (`STATUS_WDF_INCOMPATIBLE_EXECUTION_LEVEL`); clear it for a device parent that has none.
#[must_use]
pub const fn wdf_workitem_config_init(evt_work_item_func: PFN_WDF_WORKITEM) -> WDF_WORKITEM_CONFIG {
    let mut config = zeroed!(WDF_WORKITEM_CONFIG);
    config.Size = wdf_structure_size::<WDF_WORKITEM_CONFIG>();
    config.EvtWorkItemFunc = evt_work_item_func;
    config.AutomaticSerialization = WDF_TRUE;
    config
}

/// `WDF_DPC_CONFIG_INIT(&config, EvtDpcFunc)`: `AutomaticSerialization = TRUE`.
#[must_use]
pub const fn wdf_dpc_config_init(evt_dpc_func: PFN_WDF_DPC) -> WDF_DPC_CONFIG {
    let mut config = zeroed!(WDF_DPC_CONFIG);
    config.Size = wdf_structure_size::<WDF_DPC_CONFIG>();
    config.EvtDpcFunc = evt_dpc_func;
    config.AutomaticSerialization = WDF_TRUE;
    config
}

/// `WDF_TIMER_CONFIG_INIT(&config, EvtTimerFunc)`: one-shot (`Period = 0`),
/// `AutomaticSerialization = TRUE`, `TolerableDelay = 0`.
#[must_use]
pub const fn wdf_timer_config_init(evt_timer_func: PFN_WDF_TIMER) -> WDF_TIMER_CONFIG {
    let mut config = zeroed!(WDF_TIMER_CONFIG);
    config.Size = wdf_structure_size::<WDF_TIMER_CONFIG>();
    config.EvtTimerFunc = evt_timer_func;
    config.AutomaticSerialization = WDF_TRUE;
    config
}

/// `WDF_REQUEST_PARAMETERS_INIT(&parameters)`: zero and a `USHORT` `Size`.
#[must_use]
pub const fn wdf_request_parameters_init() -> WDF_REQUEST_PARAMETERS {
    let mut parameters = zeroed!(WDF_REQUEST_PARAMETERS);
    let size = wdf_structure_size::<WDF_REQUEST_PARAMETERS>();
    assert!(size <= USHORT::MAX as ULONG);
    #[allow(
        clippy::cast_possible_truncation,
        reason = "checked against USHORT::MAX on the line above"
    )]
    let size = size as USHORT;
    parameters.Size = size;
    parameters
}

// The helpers run at compile time here, so the type-check also checks the defaults above.
const _: () = {
    let attributes = wdf_object_attributes_init();
    assert!(attributes.Size == 56);
    assert!(attributes.ExecutionLevel == _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent);
    assert!(
        attributes.SynchronizationScope
            == _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent
    );
    assert!(attributes.ParentObject.is_null() && attributes.ContextTypeInfo.is_null());

    assert!(wdf_driver_config_init(None).Size == 32);
    assert!(wdf_pnppower_event_callbacks_init().Size == 144);

    let parallel = wdf_io_queue_config_init_default_queue(
        _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel,
    );
    assert!(parallel.Size == 96);
    assert!(parallel.DefaultQueue == WDF_TRUE);
    assert!(parallel.PowerManaged == _WDF_TRI_STATE::WdfUseDefault);
    // SAFETY: `Parallel` is the union's only member, written by the helper.
    assert!(unsafe { parallel.Settings.Parallel.NumberOfPresentedRequests } == ULONG::MAX);

    let manual = wdf_io_queue_config_init(_WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchManual);
    assert!(manual.DefaultQueue == 0);
    // SAFETY: as above; manual and sequential queues must leave the limit at zero.
    assert!(unsafe { manual.Settings.Parallel.NumberOfPresentedRequests } == 0);

    let file = wdf_fileobject_config_init(None, None, None);
    assert!(file.Size == 40);
    assert!(file.AutoForwardCleanupClose == _WDF_TRI_STATE::WdfUseDefault);
    assert!(file.FileObjectClass == _WDF_FILEOBJECT_CLASS::WdfFileObjectWdfCannotUseFsContexts);

    assert!(wdf_workitem_config_init(None).AutomaticSerialization == WDF_TRUE);
    assert!(wdf_dpc_config_init(None).AutomaticSerialization == WDF_TRUE);
    assert!(wdf_timer_config_init(None).Size == 40);
    assert!(wdf_request_parameters_init().Size == 40);
};
