#!/usr/bin/env python3
"""Keeps docs/WINDOWS.md's table of every WDF and WDM call in driver/ complete and exact.

Collects the system routines driver/ calls:
  * every WDF DDI named in a `call_unsafe_wdf_function_binding!(Name, ...)` invocation, each of
    which must appear in exactly one invocation (the wrappers in driver/wdf/ write each
    framework call once);
  * every routine imported from `wdk_sys::ntddk`;
  * the routines the wdk crates call on the driver's behalf, wherever driver/ uses them:
    `wdk::println!` (DbgPrint), `paged_code!` (KeGetCurrentIrql), the `WdkAllocator` global
    allocator (ExAllocatePool2, ExFreePool) and `wdk_panic` (KeBugCheckEx);
and compares them with the names in the first column of the table under the heading
"## Every WDF and WDM call in `driver/`". Fails on a call without a row, on a row naming a call
driver/ no longer makes, and on a WDF call written in more than one place. The table's last
column names, for each row, the tests of the emulated KMDF that execute the calls
(`file::test`, in tools/wdf-emu/scenarios/tests/file.rs), or says that the routine exists only
in the Windows image; each named test must exist (tools/wdf-emu/run checks, from its coverage
record, that they made the calls).

Usage: ddi_table.py <repository root>
"""

import re
import sys
from collections import Counter
from pathlib import Path

HEADING = "## Every WDF and WDM call in `driver/`"

# What a use of a wdk crate facility calls, by the source pattern that shows the use.
IMPLICIT = [
    (re.compile(r"\bprintln!\s*\("), ["DbgPrint"]),
    (re.compile(r"\bpaged_code!\s*\("), ["KeGetCurrentIrql"]),
    (re.compile(r"\bWdkAllocator\b"), ["ExAllocatePool2", "ExFreePool"]),
    # Its debug-build break into the debugger is an inline `int 3` (wdk::dbg_break), not a
    # routine the image imports.
    (re.compile(r"\bextern\s+crate\s+wdk_panic\b"), ["KeBugCheckEx"]),
]

WDF_CALL = re.compile(r"call_unsafe_wdf_function_binding!\s*\(\s*(\w+)")
NTDDK_GROUP = re.compile(r"wdk_sys::ntddk::\{([^}]*)\}", re.S)
NTDDK_ONE = re.compile(r"wdk_sys::ntddk::(\w+)")


def strip_comments(text: str) -> str:
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def calls_in(driver: Path):
    wdf = Counter()
    where = {}
    other = {}
    for path in sorted(driver.rglob("*.rs")):
        text = strip_comments(path.read_text(encoding="utf-8"))
        rel = path.relative_to(driver.parent).as_posix()
        for name in WDF_CALL.findall(text):
            wdf[name] += 1
            where.setdefault(name, []).append(rel)
        for group in NTDDK_GROUP.findall(text):
            for name in re.findall(r"\w+", group):
                other.setdefault(name, rel)
        for name in NTDDK_ONE.findall(text):
            other.setdefault(name, rel)
        for pattern, names in IMPLICIT:
            if pattern.search(text):
                for name in names:
                    other.setdefault(name, rel)
    return wdf, where, other


EMULATION_TESTS = Path("tools/wdf-emu/scenarios/tests")
TEST_REF = re.compile(r"`(\w+)::(\w+)`")
WINDOWS_ONLY = "Windows image only"


# A test function, or the tests a `per_link_layer!(run: on_roce, on_infiniband)` line makes.
TEST_FN = re.compile(r"\bfn\s+(\w+)\s*\(")
PER_LINK_LAYER = re.compile(r"\bper_link_layer!\(\s*\w+\s*:\s*(\w+)\s*,\s*(\w+)\s*\)")


def test_names(text: str):
    """The names of the tests a test file defines, by hand or through its per-link-layer macro."""
    names = set(TEST_FN.findall(text))
    for pair in PER_LINK_LAYER.findall(text):
        names.update(pair)
    return names


def table_rows(doc: Path):
    """The cells of each row of the table under HEADING in `doc` (`line.split("|")`; the
    separator row left out). tools/wdf-emu/coverage_check.py reads the table through this too."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(HEADING)
    except ValueError:
        sys.exit(f"ddi_table: no heading {HEADING!r} in {doc}")
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not set(line) <= set("|-: "):
            yield line.split("|")


def routine_rows(doc: Path):
    """The cells of the table's rows that name routines (their first cell starts with one)."""
    return (cells for cells in table_rows(doc) if cells[1].startswith(" `"))


def emulation_column(root: Path, doc: Path):
    """Problems with the table's last column: a row without an executing test (or the Windows
    image only note), or a test that does not exist."""
    problems = []
    for cells in routine_rows(doc):
        first = ", ".join(re.findall(r"`(\w+)`", cells[1]))
        last = cells[-2] if len(cells) >= 3 else ""
        refs = TEST_REF.findall(last)
        if not refs and WINDOWS_ONLY not in last:
            problems.append(f"the row of {first} names no emulation test that executes it")
        for file, test in refs:
            path = root / EMULATION_TESTS / f"{file}.rs"
            if not path.is_file() or test not in test_names(path.read_text(encoding="utf-8")):
                problems.append(f"the row of {first} names {file}::{test}, which does not exist")
    return problems


def table_names(doc: Path):
    names = set()
    for cells in table_rows(doc):
        names.update(re.findall(r"`(\w+)`", cells[1]))
    names.discard("call")
    return names


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    wdf, where, other = calls_in(root / "driver")
    used = set(wdf) | set(other)
    listed = table_names(root / "docs" / "WINDOWS.md")
    failed = False
    for name in sorted(used - listed):
        origin = where.get(name, [other.get(name, "?")])[0]
        print(f"    no row in docs/WINDOWS.md for {name} (used in {origin})")
        failed = True
    for name in sorted(listed - used):
        print(f"    docs/WINDOWS.md has a row for {name}, which driver/ does not call")
        failed = True
    for problem in emulation_column(root, root / "docs" / "WINDOWS.md"):
        print(f"    {problem}")
        failed = True
    for name, count in sorted(wdf.items()):
        if count > 1:
            print(f"    {name} is written {count} times: {', '.join(where[name])}")
            failed = True
    print(
        f"    {len(wdf)} WDF DDIs (each written once), {len(other)} WDM and runtime routines, "
        f"{len(listed)} names in the table"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
