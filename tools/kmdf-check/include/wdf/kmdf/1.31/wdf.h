/*
 * wdf.h -- the KMDF 1.31 subset of the Linux type-check (tools/kmdf-check).
 *
 * Written for this project from Microsoft's public KMDF reference documentation
 * (learn.microsoft.com/windows-hardware/drivers/ddi/wdf*): the signatures, structure members,
 * enumeration values and WDFFUNCENUM table indices published there are facts; the layout of
 * this file and every word of it are ours. It is NOT Microsoft's header and declares only what
 * the WinVerbs glue, the probe driver and the wdk crates use. Each section names the WDK
 * header the declarations belong to, so a missing one is easy to look up.
 *
 * Adding a DDI (see tools/kmdf-check/README.md):
 *   1. its WdfXxxTableIndex value in WDFFUNCENUM below (KMDF 1.31 index);
 *   2. its PFN_WDFXXX typedef: upper-case name, first parameter PWDF_DRIVER_GLOBALS, every
 *      parameter named (call_unsafe_wdf_function_binding! needs the names);
 *   3. any structure, enumeration or callback type it takes, with a size assertion in
 *      wdk-sys's src/layout.rs when the size is published or verified.
 *
 * Parsed after kmdf_check_base.h (mingw's ntifs.h/ntddk.h) with KMDF_VERSION_MAJOR=1,
 * KMDF_VERSION_MINOR=31 and STRICT.
 */
#ifndef KMDF_CHECK_WDF_H
#define KMDF_CHECK_WDF_H

#if !defined(KMDF_VERSION_MAJOR) || KMDF_VERSION_MAJOR != 1 || !defined(KMDF_VERSION_MINOR) || \
    KMDF_VERSION_MINOR != 31
#error "this WDF subset declares KMDF 1.31; add include/wdf/kmdf/<major>.<minor>/ for another"
#endif

/* Without STRICT mingw's DECLARE_HANDLE makes every WDF handle a plain HANDLE, and a swapped
 * WDFQUEUE/WDFREQUEST argument would type-check. */
#ifndef STRICT
#error "STRICT must be defined: WDF handles have to be distinct types"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- wdf.h, wdftypes.h ---- */

/* The framework's function table. The WDK renames it per version; bindgen cannot follow the
 * #define, so wdk-build's callback renames the variable back to WdfFunctions. */
#define WdfFunctions WdfFunctions_01031
typedef VOID (*WDFFUNC)(VOID);
extern const WDFFUNC *WdfFunctions;

typedef enum _WDF_TRI_STATE {
    WdfFalse = FALSE,
    WdfTrue = TRUE,
    WdfUseDefault = 2,
} WDF_TRI_STATE, *PWDF_TRI_STATE;

typedef PVOID WDFCONTEXT;

/* Opaque, allocated by the framework (WdfControlDeviceInitAllocate) or handed to
 * EvtDriverDeviceAdd. */
typedef struct WDFDEVICE_INIT *PWDFDEVICE_INIT;

/* The general object handle is deliberately typeless; the specific ones are distinct. */
typedef HANDLE WDFOBJECT, *PWDFOBJECT;

DECLARE_HANDLE(WDFDRIVER);
DECLARE_HANDLE(WDFDEVICE);
DECLARE_HANDLE(WDFQUEUE);
DECLARE_HANDLE(WDFREQUEST);
DECLARE_HANDLE(WDFFILEOBJECT);
DECLARE_HANDLE(WDFDPC);
DECLARE_HANDLE(WDFTIMER);
DECLARE_HANDLE(WDFWORKITEM);
DECLARE_HANDLE(WDFSPINLOCK);
DECLARE_HANDLE(WDFWAITLOCK);
DECLARE_HANDLE(WDFMEMORY);
DECLARE_HANDLE(WDFCMRESLIST);

#define WDF_NO_OBJECT_ATTRIBUTES (NULL)
#define WDF_NO_EVENT_CALLBACK (NULL)
#define WDF_NO_HANDLE (NULL)
#define WDF_NO_CONTEXT (NULL)
#define WDF_NO_SEND_OPTIONS (NULL)

/* ------------------------------------------------------------------------ wdfglobals.h ---- */

#define WDF_DRIVER_GLOBALS_NAME_LEN (32)

typedef struct _WDF_DRIVER_GLOBALS {
    WDFDRIVER Driver;
    ULONG DriverFlags;
    ULONG DriverTag;
    CHAR DriverName[WDF_DRIVER_GLOBALS_NAME_LEN];
    BOOLEAN DisplaceDriverUnload;
} WDF_DRIVER_GLOBALS, *PWDF_DRIVER_GLOBALS;

/* ----------------------------------------------------------------------- wdffuncenum.h ---- */

extern PWDF_DRIVER_GLOBALS WdfDriverGlobals;
extern BOOLEAN WdfClientVersionHigherThanFramework;
extern ULONG WdfFunctionCount;
extern ULONG WdfStructureCount;

/* Indices into WdfFunctions for KMDF 1.31 (only the DDIs this subset declares). */
typedef enum _WDFFUNCENUM {
    WdfControlDeviceInitAllocateTableIndex = 25,
    WdfControlDeviceInitSetShutdownNotificationTableIndex = 26,
    WdfControlFinishInitializingTableIndex = 27,
    WdfDeviceWdmGetDeviceObjectTableIndex = 31,
    WdfDeviceInitFreeTableIndex = 54,
    WdfDeviceInitSetPnpPowerEventCallbacksTableIndex = 55,
    WdfDeviceInitSetIoTypeTableIndex = 61,
    WdfDeviceInitSetExclusiveTableIndex = 62,
    WdfDeviceInitAssignNameTableIndex = 67,
    WdfDeviceInitSetFileObjectConfigTableIndex = 71,
    WdfDeviceInitSetIoInCallerContextCallbackTableIndex = 74,
    WdfDeviceCreateTableIndex = 75,
    WdfDeviceCreateSymbolicLinkTableIndex = 80,
    WdfDeviceEnqueueRequestTableIndex = 91,
    WdfDeviceGetDefaultQueueTableIndex = 92,
    WdfDpcCreateTableIndex = 111,
    WdfDpcEnqueueTableIndex = 112,
    WdfDpcGetParentObjectTableIndex = 114,
    WdfDriverCreateTableIndex = 116,
    WdfDriverWdmGetDriverObjectTableIndex = 118,
    WdfFdoInitSetFilterTableIndex = 129,
    WdfFdoQueryForInterfaceTableIndex = 131,
    WdfFileObjectGetDeviceTableIndex = 139,
    WdfIoQueueCreateTableIndex = 152,
    WdfIoQueueGetStateTableIndex = 153,
    WdfIoQueueRetrieveNextRequestTableIndex = 158,
    WdfIoQueuePurgeSynchronouslyTableIndex = 164,
    WdfIoQueuePurgeTableIndex = 165,
    WdfMemoryGetBufferTableIndex = 194,
    WdfObjectGetTypedContextWorkerTableIndex = 202,
    WdfObjectAllocateContextTableIndex = 203,
    WdfObjectReferenceActualTableIndex = 205,
    WdfObjectDereferenceActualTableIndex = 206,
    WdfObjectDeleteTableIndex = 208,
    WdfRequestUnmarkCancelableTableIndex = 256,
    WdfRequestCompleteTableIndex = 263,
    WdfRequestCompleteWithInformationTableIndex = 265,
    WdfRequestGetParametersTableIndex = 266,
    WdfRequestRetrieveInputBufferTableIndex = 269,
    WdfRequestRetrieveOutputBufferTableIndex = 270,
    WdfRequestGetFileObjectTableIndex = 277,
    WdfRequestProbeAndLockUserBufferForReadTableIndex = 278,
    WdfRequestProbeAndLockUserBufferForWriteTableIndex = 279,
    WdfRequestGetRequestorModeTableIndex = 280,
    WdfRequestForwardToIoQueueTableIndex = 281,
    WdfWaitLockCreateTableIndex = 312,
    WdfWaitLockAcquireTableIndex = 313,
    WdfWaitLockReleaseTableIndex = 314,
    WdfSpinLockCreateTableIndex = 315,
    WdfSpinLockAcquireTableIndex = 316,
    WdfSpinLockReleaseTableIndex = 317,
    WdfTimerCreateTableIndex = 318,
    WdfTimerStartTableIndex = 319,
    WdfTimerStopTableIndex = 320,
    WdfTimerGetParentObjectTableIndex = 321,
    WdfWorkItemCreateTableIndex = 379,
    WdfWorkItemEnqueueTableIndex = 380,
    WdfWorkItemGetParentObjectTableIndex = 381,
    WdfRequestMarkCancelableExTableIndex = 393,
    /* Size of the 1.31 table; wdk-sys uses WdfFunctionCount instead from 1.25 on. */
    WdfFunctionTableNumEntries = 458,
} WDFFUNCENUM;

/* ------------------------------------------------------------------------- wdfobject.h ---- */

typedef enum _WDF_EXECUTION_LEVEL {
    WdfExecutionLevelInvalid = 0x00,
    WdfExecutionLevelInheritFromParent,
    WdfExecutionLevelPassive,
    WdfExecutionLevelDispatch,
} WDF_EXECUTION_LEVEL;

typedef enum _WDF_SYNCHRONIZATION_SCOPE {
    WdfSynchronizationScopeInvalid = 0x00,
    WdfSynchronizationScopeInheritFromParent,
    WdfSynchronizationScopeDevice,
    WdfSynchronizationScopeQueue,
    WdfSynchronizationScopeNone,
} WDF_SYNCHRONIZATION_SCOPE;

typedef VOID NTAPI EVT_WDF_OBJECT_CONTEXT_CLEANUP(WDFOBJECT Object);
typedef EVT_WDF_OBJECT_CONTEXT_CLEANUP *PFN_WDF_OBJECT_CONTEXT_CLEANUP;

typedef VOID NTAPI EVT_WDF_OBJECT_CONTEXT_DESTROY(WDFOBJECT Object);
typedef EVT_WDF_OBJECT_CONTEXT_DESTROY *PFN_WDF_OBJECT_CONTEXT_DESTROY;

typedef const struct _WDF_OBJECT_CONTEXT_TYPE_INFO *PCWDF_OBJECT_CONTEXT_TYPE_INFO;

typedef PCWDF_OBJECT_CONTEXT_TYPE_INFO (__cdecl *PFN_GET_UNIQUE_CONTEXT_TYPE)(VOID);

typedef struct _WDF_OBJECT_CONTEXT_TYPE_INFO {
    ULONG Size;
    LPCSTR ContextName;
    size_t ContextSize;
    PCWDF_OBJECT_CONTEXT_TYPE_INFO UniqueType;
    PFN_GET_UNIQUE_CONTEXT_TYPE EvtDriverGetUniqueContextType;
} WDF_OBJECT_CONTEXT_TYPE_INFO, *PWDF_OBJECT_CONTEXT_TYPE_INFO;

typedef struct _WDF_OBJECT_ATTRIBUTES {
    ULONG Size;
    PFN_WDF_OBJECT_CONTEXT_CLEANUP EvtCleanupCallback;
    PFN_WDF_OBJECT_CONTEXT_DESTROY EvtDestroyCallback;
    WDF_EXECUTION_LEVEL ExecutionLevel;
    WDF_SYNCHRONIZATION_SCOPE SynchronizationScope;
    WDFOBJECT ParentObject;
    size_t ContextSizeOverride;
    PCWDF_OBJECT_CONTEXT_TYPE_INFO ContextTypeInfo;
} WDF_OBJECT_ATTRIBUTES, *PWDF_OBJECT_ATTRIBUTES;

typedef PVOID (FASTCALL *PFN_WDFOBJECTGETTYPEDCONTEXTWORKER)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFOBJECT Handle,
    PCWDF_OBJECT_CONTEXT_TYPE_INFO TypeInfo);

typedef NTSTATUS (NTAPI *PFN_WDFOBJECTALLOCATECONTEXT)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFOBJECT Handle,
    PWDF_OBJECT_ATTRIBUTES ContextAttributes,
    PVOID *Context);

/* The WdfObjectReference/WdfObjectDereference(WithTag) macros call these with __LINE__ and
 * __FILE__; Rust callers pass their own. */
typedef VOID (NTAPI *PFN_WDFOBJECTREFERENCEACTUAL)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFOBJECT Handle,
    PVOID Tag,
    LONG Line,
    PCCH File);

typedef VOID (NTAPI *PFN_WDFOBJECTDEREFERENCEACTUAL)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFOBJECT Handle,
    PVOID Tag,
    LONG Line,
    PCCH File);

typedef VOID (NTAPI *PFN_WDFOBJECTDELETE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFOBJECT Object);

/* --------------------------------------------------------------------------- wdfsync.h ---- */

typedef NTSTATUS (NTAPI *PFN_WDFSPINLOCKCREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDF_OBJECT_ATTRIBUTES SpinLockAttributes,
    WDFSPINLOCK *SpinLock);

typedef VOID (NTAPI *PFN_WDFSPINLOCKACQUIRE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFSPINLOCK SpinLock);

typedef VOID (NTAPI *PFN_WDFSPINLOCKRELEASE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFSPINLOCK SpinLock);

/* A lock held at PASSIVE_LEVEL (the caller waits for it inside a critical region). Acquire:
 * PASSIVE_LEVEL without a timeout or with a non-zero one, DISPATCH_LEVEL with a zero timeout
 * (then it only tries); Timeout is relative in 100 ns units when negative. */
typedef NTSTATUS (NTAPI *PFN_WDFWAITLOCKCREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDF_OBJECT_ATTRIBUTES LockAttributes,
    WDFWAITLOCK *Lock);

typedef NTSTATUS (NTAPI *PFN_WDFWAITLOCKACQUIRE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFWAITLOCK Lock,
    PLONGLONG Timeout);

typedef VOID (NTAPI *PFN_WDFWAITLOCKRELEASE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFWAITLOCK Lock);

/* ------------------------------------------------------------------------- wdfdriver.h ---- */

typedef enum _WDF_DRIVER_INIT_FLAGS {
    WdfDriverInitNonPnpDriver = 0x00000001,
    WdfDriverInitNoDispatchOverride = 0x00000002,
    WdfVerifyOn = 0x00000004,
    WdfVerifierOn = 0x00000008,
    WdfDriverInitCompanion = 0x00000010,
} WDF_DRIVER_INIT_FLAGS;

typedef NTSTATUS NTAPI EVT_WDF_DRIVER_DEVICE_ADD(WDFDRIVER Driver, PWDFDEVICE_INIT DeviceInit);
typedef EVT_WDF_DRIVER_DEVICE_ADD *PFN_WDF_DRIVER_DEVICE_ADD;

typedef VOID NTAPI EVT_WDF_DRIVER_UNLOAD(WDFDRIVER Driver);
typedef EVT_WDF_DRIVER_UNLOAD *PFN_WDF_DRIVER_UNLOAD;

typedef struct _WDF_DRIVER_CONFIG {
    ULONG Size;
    PFN_WDF_DRIVER_DEVICE_ADD EvtDriverDeviceAdd;
    PFN_WDF_DRIVER_UNLOAD EvtDriverUnload;
    ULONG DriverInitFlags;
    ULONG DriverPoolTag;
} WDF_DRIVER_CONFIG, *PWDF_DRIVER_CONFIG;

typedef NTSTATUS (NTAPI *PFN_WDFDRIVERCREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PDRIVER_OBJECT DriverObject,
    PCUNICODE_STRING RegistryPath,
    PWDF_OBJECT_ATTRIBUTES DriverAttributes,
    PWDF_DRIVER_CONFIG DriverConfig,
    WDFDRIVER *Driver);

typedef PDRIVER_OBJECT (NTAPI *PFN_WDFDRIVERWDMGETDRIVEROBJECT)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDRIVER Driver);

/* ------------------------------------------------------------------------- wdfmemory.h ---- */

typedef PVOID (NTAPI *PFN_WDFMEMORYGETBUFFER)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFMEMORY Memory,
    size_t *BufferSize);

/* ----------------------------------------------------------------- wdfdevice.h (types) ---- */

typedef enum _WDF_FILEOBJECT_CLASS {
    WdfFileObjectInvalid = 0,
    WdfFileObjectNotRequired = 1,
    WdfFileObjectWdfCanUseFsContext = 2,
    WdfFileObjectWdfCanUseFsContext2 = 3,
    WdfFileObjectWdfCannotUseFsContexts = 4,
    WdfFileObjectCanBeOptional = 0x80000000,
} WDF_FILEOBJECT_CLASS, *PWDF_FILEOBJECT_CLASS;

typedef enum _WDF_POWER_DEVICE_STATE {
    WdfPowerDeviceInvalid = 0,
    WdfPowerDeviceD0,
    WdfPowerDeviceD1,
    WdfPowerDeviceD2,
    WdfPowerDeviceD3,
    WdfPowerDeviceD3Final,
    WdfPowerDevicePrepareForHibernation,
    WdfPowerDeviceMaximum,
} WDF_POWER_DEVICE_STATE, *PWDF_POWER_DEVICE_STATE;

typedef enum _WDF_SPECIAL_FILE_TYPE {
    WdfSpecialFileUndefined = 0,
    WdfSpecialFilePaging = 1,
    WdfSpecialFileHibernation,
    WdfSpecialFileDump,
    WdfSpecialFileBoot,
    WdfSpecialFilePostDisplay,
    WdfSpecialFileGuestAssigned,
    WdfSpecialFileMax,
} WDF_SPECIAL_FILE_TYPE, *PWDF_SPECIAL_FILE_TYPE;

typedef enum _WDF_DEVICE_IO_TYPE {
    WdfDeviceIoUndefined = 0,
    WdfDeviceIoNeither,
    WdfDeviceIoBuffered,
    WdfDeviceIoDirect,
    WdfDeviceIoBufferedOrDirect = 4,
    WdfDeviceIoMaximum,
} WDF_DEVICE_IO_TYPE, *PWDF_DEVICE_IO_TYPE;

typedef VOID NTAPI EVT_WDF_DEVICE_FILE_CREATE(
    WDFDEVICE Device,
    WDFREQUEST Request,
    WDFFILEOBJECT FileObject);
typedef EVT_WDF_DEVICE_FILE_CREATE *PFN_WDF_DEVICE_FILE_CREATE;

typedef VOID NTAPI EVT_WDF_FILE_CLOSE(WDFFILEOBJECT FileObject);
typedef EVT_WDF_FILE_CLOSE *PFN_WDF_FILE_CLOSE;

typedef VOID NTAPI EVT_WDF_FILE_CLEANUP(WDFFILEOBJECT FileObject);
typedef EVT_WDF_FILE_CLEANUP *PFN_WDF_FILE_CLEANUP;

typedef struct _WDF_FILEOBJECT_CONFIG {
    ULONG Size;
    PFN_WDF_DEVICE_FILE_CREATE EvtDeviceFileCreate;
    PFN_WDF_FILE_CLOSE EvtFileClose;
    PFN_WDF_FILE_CLEANUP EvtFileCleanup;
    WDF_TRI_STATE AutoForwardCleanupClose;
    WDF_FILEOBJECT_CLASS FileObjectClass;
} WDF_FILEOBJECT_CONFIG, *PWDF_FILEOBJECT_CONFIG;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_D0_ENTRY(
    WDFDEVICE Device,
    WDF_POWER_DEVICE_STATE PreviousState);
typedef EVT_WDF_DEVICE_D0_ENTRY *PFN_WDF_DEVICE_D0_ENTRY;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_D0_ENTRY_POST_INTERRUPTS_ENABLED(
    WDFDEVICE Device,
    WDF_POWER_DEVICE_STATE PreviousState);
typedef EVT_WDF_DEVICE_D0_ENTRY_POST_INTERRUPTS_ENABLED
    *PFN_WDF_DEVICE_D0_ENTRY_POST_INTERRUPTS_ENABLED;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_D0_EXIT(
    WDFDEVICE Device,
    WDF_POWER_DEVICE_STATE TargetState);
typedef EVT_WDF_DEVICE_D0_EXIT *PFN_WDF_DEVICE_D0_EXIT;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_D0_EXIT_PRE_INTERRUPTS_DISABLED(
    WDFDEVICE Device,
    WDF_POWER_DEVICE_STATE TargetState);
typedef EVT_WDF_DEVICE_D0_EXIT_PRE_INTERRUPTS_DISABLED
    *PFN_WDF_DEVICE_D0_EXIT_PRE_INTERRUPTS_DISABLED;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_PREPARE_HARDWARE(
    WDFDEVICE Device,
    WDFCMRESLIST ResourcesRaw,
    WDFCMRESLIST ResourcesTranslated);
typedef EVT_WDF_DEVICE_PREPARE_HARDWARE *PFN_WDF_DEVICE_PREPARE_HARDWARE;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_RELEASE_HARDWARE(
    WDFDEVICE Device,
    WDFCMRESLIST ResourcesTranslated);
typedef EVT_WDF_DEVICE_RELEASE_HARDWARE *PFN_WDF_DEVICE_RELEASE_HARDWARE;

typedef VOID NTAPI EVT_WDF_DEVICE_SELF_MANAGED_IO_CLEANUP(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_SELF_MANAGED_IO_CLEANUP *PFN_WDF_DEVICE_SELF_MANAGED_IO_CLEANUP;

typedef VOID NTAPI EVT_WDF_DEVICE_SELF_MANAGED_IO_FLUSH(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_SELF_MANAGED_IO_FLUSH *PFN_WDF_DEVICE_SELF_MANAGED_IO_FLUSH;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_SELF_MANAGED_IO_INIT(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_SELF_MANAGED_IO_INIT *PFN_WDF_DEVICE_SELF_MANAGED_IO_INIT;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_SELF_MANAGED_IO_SUSPEND(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_SELF_MANAGED_IO_SUSPEND *PFN_WDF_DEVICE_SELF_MANAGED_IO_SUSPEND;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_SELF_MANAGED_IO_RESTART(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_SELF_MANAGED_IO_RESTART *PFN_WDF_DEVICE_SELF_MANAGED_IO_RESTART;

typedef VOID NTAPI EVT_WDF_DEVICE_SURPRISE_REMOVAL(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_SURPRISE_REMOVAL *PFN_WDF_DEVICE_SURPRISE_REMOVAL;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_QUERY_REMOVE(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_QUERY_REMOVE *PFN_WDF_DEVICE_QUERY_REMOVE;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_QUERY_STOP(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_QUERY_STOP *PFN_WDF_DEVICE_QUERY_STOP;

typedef VOID NTAPI EVT_WDF_DEVICE_USAGE_NOTIFICATION(
    WDFDEVICE Device,
    WDF_SPECIAL_FILE_TYPE NotificationType,
    BOOLEAN IsInNotificationPath);
typedef EVT_WDF_DEVICE_USAGE_NOTIFICATION *PFN_WDF_DEVICE_USAGE_NOTIFICATION;

typedef VOID NTAPI EVT_WDF_DEVICE_RELATIONS_QUERY(
    WDFDEVICE Device,
    DEVICE_RELATION_TYPE RelationType);
typedef EVT_WDF_DEVICE_RELATIONS_QUERY *PFN_WDF_DEVICE_RELATIONS_QUERY;

typedef NTSTATUS NTAPI EVT_WDF_DEVICE_USAGE_NOTIFICATION_EX(
    WDFDEVICE Device,
    WDF_SPECIAL_FILE_TYPE NotificationType,
    BOOLEAN IsInNotificationPath);
typedef EVT_WDF_DEVICE_USAGE_NOTIFICATION_EX *PFN_WDF_DEVICE_USAGE_NOTIFICATION_EX;

typedef struct _WDF_PNPPOWER_EVENT_CALLBACKS {
    ULONG Size;
    PFN_WDF_DEVICE_D0_ENTRY EvtDeviceD0Entry;
    PFN_WDF_DEVICE_D0_ENTRY_POST_INTERRUPTS_ENABLED EvtDeviceD0EntryPostInterruptsEnabled;
    PFN_WDF_DEVICE_D0_EXIT EvtDeviceD0Exit;
    PFN_WDF_DEVICE_D0_EXIT_PRE_INTERRUPTS_DISABLED EvtDeviceD0ExitPreInterruptsDisabled;
    PFN_WDF_DEVICE_PREPARE_HARDWARE EvtDevicePrepareHardware;
    PFN_WDF_DEVICE_RELEASE_HARDWARE EvtDeviceReleaseHardware;
    PFN_WDF_DEVICE_SELF_MANAGED_IO_CLEANUP EvtDeviceSelfManagedIoCleanup;
    PFN_WDF_DEVICE_SELF_MANAGED_IO_FLUSH EvtDeviceSelfManagedIoFlush;
    PFN_WDF_DEVICE_SELF_MANAGED_IO_INIT EvtDeviceSelfManagedIoInit;
    PFN_WDF_DEVICE_SELF_MANAGED_IO_SUSPEND EvtDeviceSelfManagedIoSuspend;
    PFN_WDF_DEVICE_SELF_MANAGED_IO_RESTART EvtDeviceSelfManagedIoRestart;
    PFN_WDF_DEVICE_SURPRISE_REMOVAL EvtDeviceSurpriseRemoval;
    PFN_WDF_DEVICE_QUERY_REMOVE EvtDeviceQueryRemove;
    PFN_WDF_DEVICE_QUERY_STOP EvtDeviceQueryStop;
    PFN_WDF_DEVICE_USAGE_NOTIFICATION EvtDeviceUsageNotification;
    PFN_WDF_DEVICE_RELATIONS_QUERY EvtDeviceRelationsQuery;
    PFN_WDF_DEVICE_USAGE_NOTIFICATION_EX EvtDeviceUsageNotificationEx;
} WDF_PNPPOWER_EVENT_CALLBACKS, *PWDF_PNPPOWER_EVENT_CALLBACKS;

typedef VOID NTAPI EVT_WDF_IO_IN_CALLER_CONTEXT(WDFDEVICE Device, WDFREQUEST Request);
typedef EVT_WDF_IO_IN_CALLER_CONTEXT *PFN_WDF_IO_IN_CALLER_CONTEXT;

/* ----------------------------------------------------------------------- wdffileobject.h -- */

typedef WDFDEVICE (NTAPI *PFN_WDFFILEOBJECTGETDEVICE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFFILEOBJECT FileObject);

/* -------------------------------------------------------------------------- wdfdpc.h ---- */

typedef VOID NTAPI EVT_WDF_DPC(WDFDPC Dpc);
typedef EVT_WDF_DPC *PFN_WDF_DPC;

typedef struct _WDF_DPC_CONFIG {
    ULONG Size;
    PFN_WDF_DPC EvtDpcFunc;
    BOOLEAN AutomaticSerialization;
} WDF_DPC_CONFIG, *PWDF_DPC_CONFIG;

typedef NTSTATUS (NTAPI *PFN_WDFDPCCREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDF_DPC_CONFIG Config,
    PWDF_OBJECT_ATTRIBUTES Attributes,
    WDFDPC *Dpc);

typedef BOOLEAN (NTAPI *PFN_WDFDPCENQUEUE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDPC Dpc);

typedef WDFOBJECT (NTAPI *PFN_WDFDPCGETPARENTOBJECT)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDPC Dpc);

/* ------------------------------------------------------------------------ wdftimer.h ---- */

typedef VOID NTAPI EVT_WDF_TIMER(WDFTIMER Timer);
typedef EVT_WDF_TIMER *PFN_WDF_TIMER;

typedef struct _WDF_TIMER_CONFIG {
    ULONG Size;
    PFN_WDF_TIMER EvtTimerFunc;
    ULONG Period;
    BOOLEAN AutomaticSerialization;
    ULONG TolerableDelay;
    DECLSPEC_ALIGN(8) BOOLEAN UseHighResolutionTimer;
} WDF_TIMER_CONFIG, *PWDF_TIMER_CONFIG;

typedef NTSTATUS (NTAPI *PFN_WDFTIMERCREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDF_TIMER_CONFIG Config,
    PWDF_OBJECT_ATTRIBUTES Attributes,
    WDFTIMER *Timer);

typedef BOOLEAN (NTAPI *PFN_WDFTIMERSTART)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFTIMER Timer,
    LONGLONG DueTime);

typedef BOOLEAN (NTAPI *PFN_WDFTIMERSTOP)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFTIMER Timer,
    BOOLEAN Wait);

typedef WDFOBJECT (NTAPI *PFN_WDFTIMERGETPARENTOBJECT)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFTIMER Timer);

/* --------------------------------------------------------------------- wdfworkitem.h ---- */

typedef VOID NTAPI EVT_WDF_WORKITEM(WDFWORKITEM WorkItem);
typedef EVT_WDF_WORKITEM *PFN_WDF_WORKITEM;

typedef struct _WDF_WORKITEM_CONFIG {
    ULONG Size;
    PFN_WDF_WORKITEM EvtWorkItemFunc;
    BOOLEAN AutomaticSerialization;
} WDF_WORKITEM_CONFIG, *PWDF_WORKITEM_CONFIG;

typedef NTSTATUS (NTAPI *PFN_WDFWORKITEMCREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDF_WORKITEM_CONFIG Config,
    PWDF_OBJECT_ATTRIBUTES Attributes,
    WDFWORKITEM *WorkItem);

typedef VOID (NTAPI *PFN_WDFWORKITEMENQUEUE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFWORKITEM WorkItem);

typedef WDFOBJECT (NTAPI *PFN_WDFWORKITEMGETPARENTOBJECT)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFWORKITEM WorkItem);

/* ---------------------------------------------------------------------- wdfrequest.h ---- */

typedef enum _WDF_REQUEST_TYPE {
    WdfRequestTypeCreate = 0x0,
    WdfRequestTypeCreateNamedPipe = 0x1,
    WdfRequestTypeClose = 0x2,
    WdfRequestTypeRead = 0x3,
    WdfRequestTypeWrite = 0x4,
    WdfRequestTypeQueryInformation = 0x5,
    WdfRequestTypeSetInformation = 0x6,
    WdfRequestTypeQueryEA = 0x7,
    WdfRequestTypeSetEA = 0x8,
    WdfRequestTypeFlushBuffers = 0x9,
    WdfRequestTypeQueryVolumeInformation = 0xa,
    WdfRequestTypeSetVolumeInformation = 0xb,
    WdfRequestTypeDirectoryControl = 0xc,
    WdfRequestTypeFileSystemControl = 0xd,
    WdfRequestTypeDeviceControl = 0xe,
    WdfRequestTypeDeviceControlInternal = 0xf,
    WdfRequestTypeShutdown = 0x10,
    WdfRequestTypeLockControl = 0x11,
    WdfRequestTypeCleanup = 0x12,
    WdfRequestTypeCreateMailSlot = 0x13,
    WdfRequestTypeQuerySecurity = 0x14,
    WdfRequestTypeSetSecurity = 0x15,
    WdfRequestTypePower = 0x16,
    WdfRequestTypeSystemControl = 0x17,
    WdfRequestTypeDeviceChange = 0x18,
    WdfRequestTypeQueryQuota = 0x19,
    WdfRequestTypeSetQuota = 0x1A,
    WdfRequestTypePnp = 0x1B,
    WdfRequestTypeOther = 0x1C,
    WdfRequestTypeUsb = 0x40,
    WdfRequestTypeNoFormat = 0xFF,
    WdfRequestTypeMax,
} WDF_REQUEST_TYPE;

/* POINTER_ALIGNMENT is DECLSPEC_ALIGN(8) on 64-bit targets (mingw's wdm.h agrees). */
typedef struct _WDF_REQUEST_PARAMETERS {
    USHORT Size;
    UCHAR MinorFunction;
    WDF_REQUEST_TYPE Type;
    union {
        struct {
            PIO_SECURITY_CONTEXT SecurityContext;
            ULONG Options;
            USHORT POINTER_ALIGNMENT FileAttributes;
            USHORT ShareAccess;
            ULONG POINTER_ALIGNMENT EaLength;
        } Create;
        struct {
            size_t Length;
            ULONG POINTER_ALIGNMENT Key;
            LONGLONG DeviceOffset;
        } Read;
        struct {
            size_t Length;
            ULONG POINTER_ALIGNMENT Key;
            LONGLONG DeviceOffset;
        } Write;
        struct {
            size_t OutputBufferLength;
            size_t POINTER_ALIGNMENT InputBufferLength;
            ULONG POINTER_ALIGNMENT IoControlCode;
            PVOID Type3InputBuffer;
        } DeviceIoControl;
        struct {
            PVOID Arg1;
            PVOID Arg2;
            ULONG POINTER_ALIGNMENT IoControlCode;
            PVOID Arg4;
        } Others;
    } Parameters;
} WDF_REQUEST_PARAMETERS, *PWDF_REQUEST_PARAMETERS;

typedef VOID NTAPI EVT_WDF_REQUEST_CANCEL(WDFREQUEST Request);
typedef EVT_WDF_REQUEST_CANCEL *PFN_WDF_REQUEST_CANCEL;

typedef NTSTATUS (NTAPI *PFN_WDFREQUESTMARKCANCELABLEEX)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    PFN_WDF_REQUEST_CANCEL EvtRequestCancel);

typedef NTSTATUS (NTAPI *PFN_WDFREQUESTUNMARKCANCELABLE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request);

typedef VOID (NTAPI *PFN_WDFREQUESTCOMPLETE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    NTSTATUS Status);

typedef VOID (NTAPI *PFN_WDFREQUESTCOMPLETEWITHINFORMATION)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    NTSTATUS Status,
    ULONG_PTR Information);

typedef VOID (NTAPI *PFN_WDFREQUESTGETPARAMETERS)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    PWDF_REQUEST_PARAMETERS Parameters);

typedef NTSTATUS (NTAPI *PFN_WDFREQUESTRETRIEVEINPUTBUFFER)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    size_t MinimumRequiredLength,
    PVOID *Buffer,
    size_t *Length);

typedef NTSTATUS (NTAPI *PFN_WDFREQUESTRETRIEVEOUTPUTBUFFER)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    size_t MinimumRequiredSize,
    PVOID *Buffer,
    size_t *Length);

typedef WDFFILEOBJECT (NTAPI *PFN_WDFREQUESTGETFILEOBJECT)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request);

typedef NTSTATUS (NTAPI *PFN_WDFREQUESTPROBEANDLOCKUSERBUFFERFORREAD)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    PVOID Buffer,
    size_t Length,
    WDFMEMORY *MemoryObject);

typedef NTSTATUS (NTAPI *PFN_WDFREQUESTPROBEANDLOCKUSERBUFFERFORWRITE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    PVOID Buffer,
    size_t Length,
    WDFMEMORY *MemoryObject);

typedef KPROCESSOR_MODE (NTAPI *PFN_WDFREQUESTGETREQUESTORMODE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request);

typedef NTSTATUS (NTAPI *PFN_WDFREQUESTFORWARDTOIOQUEUE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFREQUEST Request,
    WDFQUEUE DestinationQueue);

/* --------------------------------------------------------------------------- wdfio.h ---- */

typedef enum _WDF_IO_QUEUE_DISPATCH_TYPE {
    WdfIoQueueDispatchInvalid = 0,
    WdfIoQueueDispatchSequential,
    WdfIoQueueDispatchParallel,
    WdfIoQueueDispatchManual,
    WdfIoQueueDispatchMax,
} WDF_IO_QUEUE_DISPATCH_TYPE;

typedef enum _WDF_IO_QUEUE_STATE {
    WdfIoQueueAcceptRequests = 0x01,
    WdfIoQueueDispatchRequests = 0x02,
    WdfIoQueueNoRequests = 0x04,
    WdfIoQueueDriverNoRequests = 0x08,
    WdfIoQueuePnpHeld = 0x10,
} WDF_IO_QUEUE_STATE;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_DEFAULT(WDFQUEUE Queue, WDFREQUEST Request);
typedef EVT_WDF_IO_QUEUE_IO_DEFAULT *PFN_WDF_IO_QUEUE_IO_DEFAULT;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_STOP(
    WDFQUEUE Queue,
    WDFREQUEST Request,
    ULONG ActionFlags);
typedef EVT_WDF_IO_QUEUE_IO_STOP *PFN_WDF_IO_QUEUE_IO_STOP;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_RESUME(WDFQUEUE Queue, WDFREQUEST Request);
typedef EVT_WDF_IO_QUEUE_IO_RESUME *PFN_WDF_IO_QUEUE_IO_RESUME;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_READ(WDFQUEUE Queue, WDFREQUEST Request, size_t Length);
typedef EVT_WDF_IO_QUEUE_IO_READ *PFN_WDF_IO_QUEUE_IO_READ;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_WRITE(WDFQUEUE Queue, WDFREQUEST Request, size_t Length);
typedef EVT_WDF_IO_QUEUE_IO_WRITE *PFN_WDF_IO_QUEUE_IO_WRITE;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_DEVICE_CONTROL(
    WDFQUEUE Queue,
    WDFREQUEST Request,
    size_t OutputBufferLength,
    size_t InputBufferLength,
    ULONG IoControlCode);
typedef EVT_WDF_IO_QUEUE_IO_DEVICE_CONTROL *PFN_WDF_IO_QUEUE_IO_DEVICE_CONTROL;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_INTERNAL_DEVICE_CONTROL(
    WDFQUEUE Queue,
    WDFREQUEST Request,
    size_t OutputBufferLength,
    size_t InputBufferLength,
    ULONG IoControlCode);
typedef EVT_WDF_IO_QUEUE_IO_INTERNAL_DEVICE_CONTROL *PFN_WDF_IO_QUEUE_IO_INTERNAL_DEVICE_CONTROL;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_IO_CANCELED_ON_QUEUE(WDFQUEUE Queue, WDFREQUEST Request);
typedef EVT_WDF_IO_QUEUE_IO_CANCELED_ON_QUEUE *PFN_WDF_IO_QUEUE_IO_CANCELED_ON_QUEUE;

typedef VOID NTAPI EVT_WDF_IO_QUEUE_STATE(WDFQUEUE Queue, WDFCONTEXT Context);
typedef EVT_WDF_IO_QUEUE_STATE *PFN_WDF_IO_QUEUE_STATE;

typedef struct _WDF_IO_QUEUE_CONFIG {
    ULONG Size;
    WDF_IO_QUEUE_DISPATCH_TYPE DispatchType;
    WDF_TRI_STATE PowerManaged;
    BOOLEAN AllowZeroLengthRequests;
    BOOLEAN DefaultQueue;
    PFN_WDF_IO_QUEUE_IO_DEFAULT EvtIoDefault;
    PFN_WDF_IO_QUEUE_IO_READ EvtIoRead;
    PFN_WDF_IO_QUEUE_IO_WRITE EvtIoWrite;
    PFN_WDF_IO_QUEUE_IO_DEVICE_CONTROL EvtIoDeviceControl;
    PFN_WDF_IO_QUEUE_IO_INTERNAL_DEVICE_CONTROL EvtIoInternalDeviceControl;
    PFN_WDF_IO_QUEUE_IO_STOP EvtIoStop;
    PFN_WDF_IO_QUEUE_IO_RESUME EvtIoResume;
    PFN_WDF_IO_QUEUE_IO_CANCELED_ON_QUEUE EvtIoCanceledOnQueue;
    union {
        struct {
            ULONG NumberOfPresentedRequests;
        } Parallel;
    } Settings;
    WDFDRIVER Driver;
} WDF_IO_QUEUE_CONFIG, *PWDF_IO_QUEUE_CONFIG;

typedef NTSTATUS (NTAPI *PFN_WDFIOQUEUECREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDEVICE Device,
    PWDF_IO_QUEUE_CONFIG Config,
    PWDF_OBJECT_ATTRIBUTES QueueAttributes,
    WDFQUEUE *Queue);

typedef WDF_IO_QUEUE_STATE (NTAPI *PFN_WDFIOQUEUEGETSTATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFQUEUE Queue,
    PULONG QueueRequests,
    PULONG DriverRequests);

typedef NTSTATUS (NTAPI *PFN_WDFIOQUEUERETRIEVENEXTREQUEST)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFQUEUE Queue,
    WDFREQUEST *OutRequest);

typedef VOID (NTAPI *PFN_WDFIOQUEUEPURGESYNCHRONOUSLY)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFQUEUE Queue);

typedef VOID (NTAPI *PFN_WDFIOQUEUEPURGE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFQUEUE Queue,
    PFN_WDF_IO_QUEUE_STATE PurgeComplete,
    WDFCONTEXT Context);

/* -------------------------------------------------------------- wdfdevice.h (methods) ---- */

typedef VOID (NTAPI *PFN_WDFDEVICEINITFREE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit);

typedef VOID (NTAPI *PFN_WDFDEVICEINITSETPNPPOWEREVENTCALLBACKS)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit,
    PWDF_PNPPOWER_EVENT_CALLBACKS PnpPowerEventCallbacks);

typedef VOID (NTAPI *PFN_WDFDEVICEINITSETIOTYPE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit,
    WDF_DEVICE_IO_TYPE IoType);

typedef VOID (NTAPI *PFN_WDFDEVICEINITSETEXCLUSIVE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit,
    BOOLEAN IsExclusive);

typedef NTSTATUS (NTAPI *PFN_WDFDEVICEINITASSIGNNAME)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit,
    PCUNICODE_STRING DeviceName);

typedef VOID (NTAPI *PFN_WDFDEVICEINITSETFILEOBJECTCONFIG)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit,
    PWDF_FILEOBJECT_CONFIG FileObjectConfig,
    PWDF_OBJECT_ATTRIBUTES FileObjectAttributes);

typedef VOID (NTAPI *PFN_WDFDEVICEINITSETIOINCALLERCONTEXTCALLBACK)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit,
    PFN_WDF_IO_IN_CALLER_CONTEXT EvtIoInCallerContext);

typedef NTSTATUS (NTAPI *PFN_WDFDEVICECREATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT *DeviceInit,
    PWDF_OBJECT_ATTRIBUTES DeviceAttributes,
    WDFDEVICE *Device);

typedef NTSTATUS (NTAPI *PFN_WDFDEVICECREATESYMBOLICLINK)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDEVICE Device,
    PCUNICODE_STRING SymbolicLinkName);

typedef PDEVICE_OBJECT (NTAPI *PFN_WDFDEVICEWDMGETDEVICEOBJECT)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDEVICE Device);

typedef NTSTATUS (NTAPI *PFN_WDFDEVICEENQUEUEREQUEST)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDEVICE Device,
    WDFREQUEST Request);

typedef WDFQUEUE (NTAPI *PFN_WDFDEVICEGETDEFAULTQUEUE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDEVICE Device);

/* --------------------------------------------------------------------------- wdffdo.h ---- */

typedef VOID (NTAPI *PFN_WDFFDOINITSETFILTER)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit);

typedef NTSTATUS (NTAPI *PFN_WDFFDOQUERYFORINTERFACE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDEVICE Fdo,
    LPCGUID InterfaceType,
    PINTERFACE Interface,
    USHORT Size,
    USHORT Version,
    PVOID InterfaceSpecificData);

/* ----------------------------------------------------------------------- wdfcontrol.h ---- */

typedef enum _WDF_DEVICE_SHUTDOWN_FLAGS {
    WdfDeviceShutdown = 0x01,
    WdfDeviceLastChanceShutdown = 0x02,
} WDF_DEVICE_SHUTDOWN_FLAGS;

typedef VOID NTAPI EVT_WDF_DEVICE_SHUTDOWN_NOTIFICATION(WDFDEVICE Device);
typedef EVT_WDF_DEVICE_SHUTDOWN_NOTIFICATION *PFN_WDF_DEVICE_SHUTDOWN_NOTIFICATION;

typedef PWDFDEVICE_INIT (NTAPI *PFN_WDFCONTROLDEVICEINITALLOCATE)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDRIVER Driver,
    CONST UNICODE_STRING *SDDLString);

typedef VOID (NTAPI *PFN_WDFCONTROLDEVICEINITSETSHUTDOWNNOTIFICATION)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    PWDFDEVICE_INIT DeviceInit,
    PFN_WDF_DEVICE_SHUTDOWN_NOTIFICATION Notification,
    UCHAR Flags);

typedef VOID (NTAPI *PFN_WDFCONTROLFINISHINITIALIZING)(
    PWDF_DRIVER_GLOBALS DriverGlobals,
    WDFDEVICE Device);

#ifdef __cplusplus
}
#endif

#endif /* KMDF_CHECK_WDF_H */
