/*
 * kmdf_check_base.h -- the base kernel headers of the Linux type-check (tools/kmdf-check).
 *
 * Written for this project; not a Microsoft header. It includes the same base headers the real
 * wdk-build 0.6.0 hands to bindgen (ntifs.h, ntddk.h, ntstrsafe.h), taken from Debian's
 * mingw-w64-common, and declares what those headers lack but the wdk crates or the driver
 * glue call. Every declaration below follows the routine's page in Microsoft's kernel-mode
 * DDI reference (learn.microsoft.com/windows-hardware/drivers/ddi/wdm/...).
 */
#ifndef KMDF_CHECK_BASE_H
#define KMDF_CHECK_BASE_H

/*
 * On x64 mingw defines KeGetCurrentIrql as an inline CR8 read. bindgen emits no inline
 * functions, so wdk-sys's PAGED_CODE!() (which calls wdk_sys::ntddk::KeGetCurrentIrql) would
 * not compile. ntoskrnl exports the routine; move mingw's inline out of the way and declare it.
 */
#define KeGetCurrentIrql kmdf_check_mingw_inline_KeGetCurrentIrql
#include <ntifs.h>
#include <ntddk.h>
#include <ntstrsafe.h>
#undef KeGetCurrentIrql

#ifdef __cplusplus
extern "C" {
#endif

/* wdm/nf-wdm-kegetcurrentirql */
NTHALAPI KIRQL NTAPI KeGetCurrentIrql(VOID);

/*
 * wdm/nf-wdm-exallocatepool2 (Windows 10 2004 and later). wdk-alloc's WdkAllocator calls it;
 * the POOL_FLAG_* values live in wdk-sys's constants.rs as in the real crate, because bindgen
 * cannot read the WDK's ui64-suffixed macros.
 */
typedef ULONG64 POOL_FLAGS;

#ifndef DECLSPEC_RESTRICT
#define DECLSPEC_RESTRICT __declspec(restrict)
#endif

NTKERNELAPI DECLSPEC_RESTRICT PVOID NTAPI ExAllocatePool2(
    POOL_FLAGS Flags,
    SIZE_T NumberOfBytes,
    ULONG Tag);

/* wdm/nf-wdm-kequeryinterrupttimeprecise (Windows 8.1 and later) */
NTKERNELAPI ULONG64 NTAPI KeQueryInterruptTimePrecise(PULONG64 QpcTimeStamp);

#ifdef __cplusplus
}
#endif

#endif /* KMDF_CHECK_BASE_H */
