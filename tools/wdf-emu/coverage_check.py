#!/usr/bin/env python3
"""Checks docs/WINDOWS.md's table of every WDF and WDM call in driver/ against what the glue's
tests really called on the emulated KMDF: for each row, the tests its last column names
(`file::test`) must together have made every call the row lists. The record comes from a run
with WDF_EMU_COVERAGE=<file> (one line per machine: the test's name and the routines called).

Usage: coverage_check.py ROOT_DIR COVERAGE_FILE
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

# The table is kmdf-check's (its ddi_table.py keeps it complete); read it the same way.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kmdf-check"))
from ddi_table import routine_rows  # noqa: E402


def main():
    root, record = Path(sys.argv[1]), Path(sys.argv[2])
    called = defaultdict(set)
    for line in record.read_text(encoding="utf-8").splitlines():
        test, _, names = line.partition(" ")
        called[test].update(n for n in names.split(",") if n)
    problems, rows = [], 0
    for cells in routine_rows(root / "docs" / "WINDOWS.md"):
        routines = re.findall(r"`(\w+)`", cells[1])
        tests = [test for _, test in re.findall(r"`(\w+)::(\w+)`", cells[-2])]
        if not tests:
            continue
        rows += 1
        made = set().union(*(called.get(t, set()) for t in tests))
        for test in tests:
            if test not in called:
                problems.append(f"{test} did not run (named for {', '.join(routines)})")
        for routine in routines:
            if routine not in made:
                problems.append(f"{routine}: not called by {', '.join(tests)}")
    for problem in problems:
        print(f"    {problem}")
    print(f"    {rows} rows of docs/WINDOWS.md checked against {len(called)} tests' calls")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
