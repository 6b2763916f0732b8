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
# The shims by absolute path, for the mirrors of kmdf-link and wdf-emu that patch with them too.
SHIM_DIRS = {name: Path(__file__).resolve().parent / path for name, path in SHIMMED_CRATES.items()}


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


class Drift:
    """What differs between the root manifest and one mirror of it, one line of the report each.
    kmdf-link's and wdf-emu's mirrors are checked with it too."""

    def __init__(self):
        self.problems = []

    def compare(self, what, expected, actual):
        if expected != actual:
            self.problems.append(f"{what} differs:\n    root:   {expected}\n    mirror: {actual}")

    def compare_dependencies(self, root_dependencies, mirror_dependencies):
        for key in sorted(set(root_dependencies) | set(mirror_dependencies), key=str):
            target, table = key
            label = f"[target.'{target}'.{table}]" if target else f"[{table}]"
            self.compare(label, root_dependencies.get(key), mirror_dependencies.get(key))

    def compare_workspaces(self, root, mirror):
        root_workspace, mirror_workspace = workspace_view(root), workspace_view(mirror)
        for key in root_workspace:
            self.compare(f"[workspace.{key}]", root_workspace[key], mirror_workspace[key])

    def compare_lock_pins(self, root_lock, mirror_lock, names):
        for name in names:
            pins = [[(p["version"], p.get("checksum")) for p in lock.get(name, [])]
                    for lock in (root_lock, mirror_lock)]
            self.compare(f"Cargo.lock pin of {name}", pins[0], pins[1])

    def compare_shim_versions(self, root_lock, shim_dirs):
        """The version the root's lockfile pins for each shimmed crate against its shim's."""
        for name, shim_dir in shim_dirs.items():
            root_versions = [p["version"] for p in root_lock.get(name, [])]
            shim_version = load(shim_dir / "Cargo.toml")["package"]["version"]
            self.compare(f"{name}: root lockfile version vs shim version", root_versions,
                         [shim_version])

    def compare_shim_patch(self, mirror, mirror_dir):
        """A mirror outside kmdf-check patches wdk-build and wdk-sys with kmdf-check's shims."""
        expected = {"crates-io": {name: {"path": str(SHIM_DIRS[name])}
                                  for name in sorted(SHIMMED_CRATES)}}
        actual = {
            registry: {name: {"path": str((mirror_dir / spec["path"]).resolve())}
                       for name, spec in crates.items()}
            for registry, crates in mirror.get("patch", {}).items()
        }
        self.compare("[patch] (mirror only)", expected, actual)

    def report(self, tool, matches):
        """Prints the verdict on tools/TOOL's mirror; the exit status."""
        if self.problems:
            print(f"{tool}'s mirror of the winverbs package has drifted from the root:")
            for problem in self.problems:
                print("  - " + problem)
            print(f"Update tools/{tool}/Cargo.toml (and `cargo update -w` there) to match.")
            return 1
        print(f"mirror: tools/{tool}/Cargo.toml matches the root winverbs package" + matches)
        return 0


def main():
    root_dir, check_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    root, mirror = load(root_dir / "Cargo.toml"), load(check_dir / "Cargo.toml")
    drift = Drift()

    known = set(PACKAGE_TABLES) | set(DEPENDENCY_TABLES) | {"workspace", "target", "patch"}
    for name, manifest in (("root", root), ("mirror", mirror)):
        unknown = set(manifest) - known
        if unknown:
            drift.problems.append(
                f"{name} Cargo.toml has tables this check does not know: {unknown}")

    root_package, mirror_package = package_view(root, root_dir), package_view(mirror, check_dir)
    for table in sorted(set(root_package) | set(mirror_package)):
        drift.compare(f"[{table}]", root_package.get(table), mirror_package.get(table))

    root_dependencies = dependency_tables(root, root_dir)
    drift.compare_dependencies(root_dependencies, dependency_tables(mirror, check_dir))
    drift.compare_workspaces(root, mirror)

    if "patch" in root:
        drift.problems.append("the root Cargo.toml has a [patch] table; kmdf-check assumes none")
    expected_patch = {name: {"path": path} for name, path in SHIMMED_CRATES.items()}
    drift.compare("[patch] (mirror only)", {"crates-io": expected_patch}, mirror.get("patch"))

    root_lock, mirror_lock = locked(root_dir / "Cargo.lock"), locked(check_dir / "Cargo.lock")
    drift.compare_lock_pins(root_lock, mirror_lock, UNMODIFIED_REGISTRY_CRATES)
    drift.compare_shim_versions(
        root_lock, {name: check_dir / path for name, path in SHIMMED_CRATES.items()})

    return drift.report(
        "kmdf-check",
        f" ({sum(len(t) for t in root_dependencies.values())} dependencies, lints, metadata, "
        "profiles, lockfile pins)")


if __name__ == "__main__":
    sys.exit(main())
