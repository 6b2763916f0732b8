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

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location(
    "kmdf_mirror", HERE.parent / "kmdf-check" / "mirror_drift.py")
kmdf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kmdf)

HOST_TARGET = "cfg(not(windows))"
HOST_CRATES = ("wdk", "wdk-sys")


def main():
    root_dir, emu_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    root, mirror = kmdf.load(root_dir / "Cargo.toml"), kmdf.load(emu_dir / "Cargo.toml")
    problems = []

    def compare(what, expected, actual):
        if expected != actual:
            problems.append(f"{what} differs:\n    root:   {expected}\n    mirror: {actual}")

    root_package, mirror_package = kmdf.package_view(root, root_dir), kmdf.package_view(mirror, emu_dir)
    # The allowed differences, checked for their exact values and then taken out.
    compare("[package] build (must be this directory's build.rs)",
            str(emu_dir / "build.rs"), mirror_package["package"].get("build"))
    compare("[lib] crate-type", ["rlib"], mirror_package.get("lib", {}).get("crate-type"))
    for view in (root_package, mirror_package):
        view["package"] = {k: v for k, v in view["package"].items() if k != "build"}
        if "lib" in view:
            view["lib"] = {k: v for k, v in view["lib"].items() if k != "crate-type"}
    for table in sorted(set(root_package) | set(mirror_package)):
        compare(f"[{table}]", root_package.get(table), mirror_package.get(table))

    root_deps = kmdf.dependency_tables(root, root_dir)
    mirror_deps = kmdf.dependency_tables(mirror, emu_dir)
    host = mirror_deps.pop((HOST_TARGET, "dependencies"), None)
    windows = root_deps.get(("cfg(windows)", "dependencies"), {})
    compare(f"[target.'{HOST_TARGET}'.dependencies] (the root's cfg(windows) wdk and wdk-sys)",
            {name: windows.get(name) for name in HOST_CRATES}, host)
    for key in sorted(set(root_deps) | set(mirror_deps), key=str):
        target, table = key
        label = f"[target.'{target}'.{table}]" if target else f"[{table}]"
        compare(label, root_deps.get(key), mirror_deps.get(key))

    root_ws, mirror_ws = kmdf.workspace_view(root), kmdf.workspace_view(mirror)
    for key in root_ws:
        compare(f"[workspace.{key}]", root_ws[key], mirror_ws[key])

    shims = HERE.parent / "kmdf-check" / "shims"
    expected_patch = {"crates-io": {name: {"path": str(shims / name)} for name in ("wdk-build", "wdk-sys")}}
    actual_patch = {
        registry: {name: {"path": str((emu_dir / spec["path"]).resolve())} for name, spec in crates.items()}
        for registry, crates in mirror.get("patch", {}).items()
    }
    compare("[patch] (mirror only)", expected_patch, actual_patch)

    root_lock, mirror_lock = kmdf.locked(root_dir / "Cargo.lock"), kmdf.locked(emu_dir / "Cargo.lock")
    for name in ("wdk", "wdk-macros"):
        pins = [[(p["version"], p.get("checksum")) for p in lock.get(name, [])]
                for lock in (root_lock, mirror_lock)]
        compare(f"Cargo.lock pin of {name}", pins[0], pins[1])
    for name in ("wdk-sys", "wdk-build"):
        root_versions = [p["version"] for p in root_lock.get(name, [])]
        shim_version = kmdf.load(shims / name / "Cargo.toml")["package"]["version"]
        compare(f"{name}: root lockfile version vs shim version", root_versions, [shim_version])

    if problems:
        print("wdf-emu's mirror of the winverbs package has drifted from the root:")
        for problem in problems:
            print("  - " + problem)
        print("Update tools/wdf-emu/Cargo.toml (and `cargo update -w` there) to match.")
        return 1
    print("mirror: tools/wdf-emu/Cargo.toml matches the root winverbs package, but for the four "
          "listed differences (build script, rlib, host wdk/wdk-sys, shim patch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
