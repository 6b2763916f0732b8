#!/usr/bin/env python3
"""Fails when tools/kmdf-check/Cargo.toml no longer mirrors the `winverbs` package of the root
Cargo.toml, or when the two lockfiles pin different wdk crates.

The kmdf-check workspace type-checks the driver package through a copy of its manifest (the
only way to patch wdk-sys/wdk-build without touching the root manifest and lockfile). A copy
can drift; this script is what keeps it honest. It compares, after resolving
`workspace = true` and relative paths:
  - [package] (except `build`, whose resolved file must be the same), [lib] (path resolved),
    [features], [lints], [profile.*] and any target table ([[bin]], [[test]], ...);
  - every dependency table, plain and per target (dependencies, build-, dev-);
  - [workspace.package], [workspace.lints] and [workspace.metadata];
  - the locked version and checksum of every wdk crate used from crates.io, and the versions
    the two shims claim.
The mirror may add exactly one thing: [patch.crates-io] with wdk-build and wdk-sys.

Usage: mirror_drift.py ROOT_DIR KMDF_CHECK_DIR
"""

import sys
import tomllib
from pathlib import Path

DEPENDENCY_TABLES = ("dependencies", "build-dependencies", "dev-dependencies")
PACKAGE_TABLES = ("package", "lib", "features", "lints", "profile", "bin", "example", "test",
                  "bench", "badges")
UNMODIFIED_REGISTRY_CRATES = ("wdk", "wdk-alloc", "wdk-panic", "wdk-macros")
SHIMMED_CRATES = {"wdk-sys": "shims/wdk-sys", "wdk-build": "shims/wdk-build"}


def load(path):
    with open(path, "rb") as file:
        return tomllib.load(file)


def resolve_path(base, value):
    return str((base / value).resolve())


def normalise_dependency(name, spec, manifest, base):
    """A dependency spec as a dict with inherited fields merged and paths made absolute."""
    if isinstance(spec, str):
        spec = {"version": spec}
    spec = dict(spec)
    if spec.pop("workspace", False):
        inherited = manifest.get("workspace", {}).get("dependencies", {}).get(name)
        if inherited is None:
            raise SystemExit(f"{base}/Cargo.toml: {name}.workspace = true, but the workspace "
                             "does not declare it")
        inherited = {"version": inherited} if isinstance(inherited, str) else dict(inherited)
        features = inherited.get("features", []) + spec.pop("features", [])
        inherited.update(spec)
        if features:
            inherited["features"] = features
        spec = inherited
    if "path" in spec:
        spec["path"] = resolve_path(base, spec["path"])
    return spec


def dependency_tables(manifest, base):
    """{(target or None, table): {name: normalised spec}} for every dependency table."""
    tables = {}
    for table in DEPENDENCY_TABLES:
        if table in manifest:
            tables[(None, table)] = {
                name: normalise_dependency(name, spec, manifest, base)
                for name, spec in manifest[table].items()
            }
    for target, target_tables in manifest.get("target", {}).items():
        for table in DEPENDENCY_TABLES:
            if table in target_tables:
                tables[(target, table)] = {
                    name: normalise_dependency(name, spec, manifest, base)
                    for name, spec in target_tables[table].items()
                }
        unknown = set(target_tables) - set(DEPENDENCY_TABLES)
        if unknown:
            raise SystemExit(f"{base}/Cargo.toml: unexpected [target.'{target}'] keys {unknown}")
    return tables


def package_view(manifest, base):
    """The package-level tables, with paths resolved so that they compare across directories."""
    view = {}
    for table in PACKAGE_TABLES:
        if table in manifest:
            view[table] = manifest[table]
    package = dict(view.get("package", {}))
    package["build"] = resolve_path(base, package.get("build", "build.rs"))
    view["package"] = package
    if "lib" in view:
        lib = dict(view["lib"])
        if "path" in lib:
            lib["path"] = resolve_path(base, lib["path"])
        view["lib"] = lib
    return view


def workspace_view(manifest):
    workspace = manifest.get("workspace", {})
    return {key: workspace.get(key) for key in ("package", "lints", "metadata")}


def locked(lockfile):
    packages = {}
    for package in load(lockfile).get("package", []):
        packages.setdefault(package["name"], []).append(package)
    return packages


def main():
    root_dir, check_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    root, mirror = load(root_dir / "Cargo.toml"), load(check_dir / "Cargo.toml")
    problems = []

    def compare(what, expected, actual):
        if expected != actual:
            problems.append(f"{what} differs:\n    root:   {expected}\n    mirror: {actual}")

    known = set(PACKAGE_TABLES) | set(DEPENDENCY_TABLES) | {"workspace", "target", "patch"}
    for name, manifest in (("root", root), ("mirror", mirror)):
        unknown = set(manifest) - known
        if unknown:
            problems.append(f"{name} Cargo.toml has tables this check does not know: {unknown}")

    root_package, mirror_package = package_view(root, root_dir), package_view(mirror, check_dir)
    for table in sorted(set(root_package) | set(mirror_package)):
        compare(f"[{table}]", root_package.get(table), mirror_package.get(table))

    root_dependencies = dependency_tables(root, root_dir)
    mirror_dependencies = dependency_tables(mirror, check_dir)
    for key in sorted(set(root_dependencies) | set(mirror_dependencies), key=str):
        target, table = key
        label = f"[target.'{target}'.{table}]" if target else f"[{table}]"
        compare(label, root_dependencies.get(key), mirror_dependencies.get(key))

    root_workspace, mirror_workspace = workspace_view(root), workspace_view(mirror)
    for key in root_workspace:
        compare(f"[workspace.{key}]", root_workspace[key], mirror_workspace[key])

    if "patch" in root:
        problems.append("the root Cargo.toml has a [patch] table; kmdf-check assumes none")
    expected_patch = {name: {"path": path} for name, path in SHIMMED_CRATES.items()}
    compare("[patch] (mirror only)", {"crates-io": expected_patch}, mirror.get("patch"))

    root_lock, mirror_lock = locked(root_dir / "Cargo.lock"), locked(check_dir / "Cargo.lock")
    for name in UNMODIFIED_REGISTRY_CRATES:
        pins = [[(p["version"], p.get("checksum")) for p in lock.get(name, [])]
                for lock in (root_lock, mirror_lock)]
        compare(f"Cargo.lock pin of {name}", pins[0], pins[1])
    for name, path in SHIMMED_CRATES.items():
        root_versions = [p["version"] for p in root_lock.get(name, [])]
        shim_version = load(check_dir / path / "Cargo.toml")["package"]["version"]
        compare(f"{name}: root lockfile version vs shim version", root_versions, [shim_version])

    if problems:
        print("kmdf-check's mirror of the winverbs package has drifted from the root:")
        for problem in problems:
            print("  - " + problem)
        print("Update tools/kmdf-check/Cargo.toml (and `cargo update -w` there) to match.")
        return 1
    print("mirror: tools/kmdf-check/Cargo.toml matches the root winverbs package "
          f"({sum(len(t) for t in root_dependencies.values())} dependencies, lints, metadata, "
          "profiles, lockfile pins)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
