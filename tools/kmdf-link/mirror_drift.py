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

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location(
    "kmdf_mirror", HERE.parent / "kmdf-check" / "mirror_drift.py")
kmdf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kmdf)


def main():
    root_dir, link_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    root, mirror = kmdf.load(root_dir / "Cargo.toml"), kmdf.load(link_dir / "Cargo.toml")
    problems = []

    def compare(what, expected, actual):
        if expected != actual:
            problems.append(f"{what} differs:\n    root:   {expected}\n    mirror: {actual}")

    known = set(kmdf.PACKAGE_TABLES) | set(kmdf.DEPENDENCY_TABLES) | {"workspace", "target", "patch"}
    unknown = set(mirror) - known
    if unknown:
        problems.append(f"mirror Cargo.toml has tables this check does not know: {unknown}")

    root_package = kmdf.package_view(root, root_dir)
    mirror_package = kmdf.package_view(mirror, link_dir)
    compare("[package] build (must be this directory's build.rs)",
            str(link_dir / "build.rs"), mirror_package["package"].get("build"))
    for view in (root_package, mirror_package):
        view["package"] = {k: v for k, v in view["package"].items() if k != "build"}
    for table in sorted(set(root_package) | set(mirror_package)):
        compare(f"[{table}]", root_package.get(table), mirror_package.get(table))

    root_deps = kmdf.dependency_tables(root, root_dir)
    mirror_deps = kmdf.dependency_tables(mirror, link_dir)
    for key in sorted(set(root_deps) | set(mirror_deps), key=str):
        target, table = key
        label = f"[target.'{target}'.{table}]" if target else f"[{table}]"
        compare(label, root_deps.get(key), mirror_deps.get(key))

    root_ws, mirror_ws = kmdf.workspace_view(root), kmdf.workspace_view(mirror)
    for key in root_ws:
        compare(f"[workspace.{key}]", root_ws[key], mirror_ws[key])

    shims = HERE.parent / "kmdf-check" / "shims"
    expected_patch = {"crates-io": {name: {"path": str(shims / name)}
                                    for name in ("wdk-build", "wdk-sys")}}
    actual_patch = {
        registry: {name: {"path": str((link_dir / spec["path"]).resolve())}
                   for name, spec in crates.items()}
        for registry, crates in mirror.get("patch", {}).items()
    }
    compare("[patch] (mirror only)", expected_patch, actual_patch)

    root_lock = kmdf.locked(root_dir / "Cargo.lock")
    mirror_lock = kmdf.locked(link_dir / "Cargo.lock")
    for name in kmdf.UNMODIFIED_REGISTRY_CRATES:
        pins = [[(p["version"], p.get("checksum")) for p in lock.get(name, [])]
                for lock in (root_lock, mirror_lock)]
        compare(f"Cargo.lock pin of {name}", pins[0], pins[1])
    for name in ("wdk-sys", "wdk-build"):
        root_versions = [p["version"] for p in root_lock.get(name, [])]
        shim_version = kmdf.load(shims / name / "Cargo.toml")["package"]["version"]
        compare(f"{name}: root lockfile version vs shim version", root_versions, [shim_version])

    if problems:
        print("kmdf-link's mirror of the winverbs package has drifted from the root:")
        for problem in problems:
            print("  - " + problem)
        print("Update tools/kmdf-link/Cargo.toml (and `cargo update -w` there) to match.")
        return 1
    print("mirror: tools/kmdf-link/Cargo.toml matches the root winverbs package, but for the two "
          "listed differences (build script, shim patch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
