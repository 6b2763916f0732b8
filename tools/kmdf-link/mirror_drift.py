#!/usr/bin/env python3
"""Fails when tools/kmdf-link/Cargo.toml no longer mirrors the `winverbs` package of the root
Cargo.toml, or when the two lockfiles pin different wdk crates.

The Linux link builds the driver package through a copy of its manifest. It is compared with
the root the way tools/kmdf-check/mirror_drift.py compares kmdf-check's mirror (that script's
functions do the resolving), and may differ in exactly these ways:

  [package] build       build.rs here: configures the Linux link of winverbs.sys (rust-lld,
                        wdk-build 0.6's KMDF link arguments, the project's import libraries and
                        FxDriverEntry stub), where the root's build script calls wdk-build on a
                        Windows host and does nothing elsewhere
  [patch.crates-io]     wdk-sys and wdk-build: kmdf-check's Linux shims

Usage: mirror_drift.py ROOT_DIR KMDF_LINK_DIR
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "kmdf-check"))
import mirror_drift as kmdf  # kmdf-check's script, not this one: its directory comes first


def main():
    root_dir, link_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    root, mirror = kmdf.load(root_dir / "Cargo.toml"), kmdf.load(link_dir / "Cargo.toml")
    drift = kmdf.Drift()

    known = set(kmdf.PACKAGE_TABLES) | set(kmdf.DEPENDENCY_TABLES) | {"workspace", "target", "patch"}
    unknown = set(mirror) - known
    if unknown:
        drift.problems.append(f"mirror Cargo.toml has tables this check does not know: {unknown}")

    root_package = kmdf.package_view(root, root_dir)
    mirror_package = kmdf.package_view(mirror, link_dir)
    drift.compare("[package] build (must be this directory's build.rs)",
                  str(link_dir / "build.rs"), mirror_package["package"].get("build"))
    for view in (root_package, mirror_package):
        view["package"] = {k: v for k, v in view["package"].items() if k != "build"}
    for table in sorted(set(root_package) | set(mirror_package)):
        drift.compare(f"[{table}]", root_package.get(table), mirror_package.get(table))

    drift.compare_dependencies(kmdf.dependency_tables(root, root_dir),
                               kmdf.dependency_tables(mirror, link_dir))
    drift.compare_workspaces(root, mirror)
    drift.compare_shim_patch(mirror, link_dir)

    root_lock = kmdf.locked(root_dir / "Cargo.lock")
    mirror_lock = kmdf.locked(link_dir / "Cargo.lock")
    drift.compare_lock_pins(root_lock, mirror_lock, kmdf.UNMODIFIED_REGISTRY_CRATES)
    drift.compare_shim_versions(root_lock, kmdf.SHIM_DIRS)

    return drift.report("kmdf-link", ", but for the two listed differences (build script, shim "
                                     "patch)")


if __name__ == "__main__":
    sys.exit(main())
