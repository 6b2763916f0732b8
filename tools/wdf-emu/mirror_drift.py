#!/usr/bin/env python3
"""Fails when tools/wdf-emu/Cargo.toml no longer mirrors the `winverbs` package of the root
Cargo.toml, or when the two lockfiles pin different wdk crates.

The emulation builds the driver's sources (driver/) for the Linux host through a copy of the
package's manifest. It is compared with the root the way tools/kmdf-check/mirror_drift.py
compares kmdf-check's mirror (that script's functions do the resolving), and may differ in
exactly these ways, each needed for a host build that the emulated KMDF links:

  [package] build            build.rs here: sets cfg(wdf_emu), the gate driver/lib.rs compiles
                             the glue under off Windows (the root's build script configures a
                             WDK link on Windows and does nothing elsewhere)
  [lib] crate-type           ["rlib"]: the glue is linked into host test executables
  [target.'cfg(not(windows))'.dependencies]
                             wdk and wdk-sys for the host, the same versions as the root's
                             cfg(windows) table (wdk-alloc and wdk-panic stay Windows-only: the
                             host process has its own allocator and panic handler)
  [patch.crates-io]          wdk-sys and wdk-build: kmdf-check's Linux shims

Usage: mirror_drift.py ROOT_DIR WDF_EMU_DIR
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "kmdf-check"))
import mirror_drift as kmdf  # kmdf-check's script, not this one: its directory comes first

HOST_TARGET = "cfg(not(windows))"
HOST_CRATES = ("wdk", "wdk-sys")


def main():
    root_dir, emu_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    root, mirror = kmdf.load(root_dir / "Cargo.toml"), kmdf.load(emu_dir / "Cargo.toml")
    drift = kmdf.Drift()

    root_package, mirror_package = kmdf.package_view(root, root_dir), kmdf.package_view(mirror, emu_dir)
    # The allowed differences, checked for their exact values and then taken out.
    drift.compare("[package] build (must be this directory's build.rs)",
                  str(emu_dir / "build.rs"), mirror_package["package"].get("build"))
    drift.compare("[lib] crate-type", ["rlib"], mirror_package.get("lib", {}).get("crate-type"))
    for view in (root_package, mirror_package):
        view["package"] = {k: v for k, v in view["package"].items() if k != "build"}
        if "lib" in view:
            view["lib"] = {k: v for k, v in view["lib"].items() if k != "crate-type"}
    for table in sorted(set(root_package) | set(mirror_package)):
        drift.compare(f"[{table}]", root_package.get(table), mirror_package.get(table))

    root_deps = kmdf.dependency_tables(root, root_dir)
    mirror_deps = kmdf.dependency_tables(mirror, emu_dir)
    host = mirror_deps.pop((HOST_TARGET, "dependencies"), None)
    windows = root_deps.get(("cfg(windows)", "dependencies"), {})
    drift.compare(f"[target.'{HOST_TARGET}'.dependencies] (the root's cfg(windows) wdk and wdk-sys)",
                  {name: windows.get(name) for name in HOST_CRATES}, host)
    drift.compare_dependencies(root_deps, mirror_deps)
    drift.compare_workspaces(root, mirror)
    drift.compare_shim_patch(mirror, emu_dir)

    root_lock, mirror_lock = kmdf.locked(root_dir / "Cargo.lock"), kmdf.locked(emu_dir / "Cargo.lock")
    drift.compare_lock_pins(root_lock, mirror_lock, ("wdk", "wdk-macros"))
    drift.compare_shim_versions(root_lock, kmdf.SHIM_DIRS)

    return drift.report("wdf-emu", ", but for the four listed differences (build script, rlib, "
                                   "host wdk/wdk-sys, shim patch)")


if __name__ == "__main__":
    sys.exit(main())
