"""Runs rdma-core's unittest suite (the `tests` package beside this file) and reports every
test's outcome, every skip with its reason, and a final `N passed, N failed, N skipped`.

Vendor-specific modules are excluded by name (they need mlx5/efa hardware or CUDA)."""
import argparse
import os
import sys
import unittest

EXCLUDED = {
    'mlx5': 'mlx5-specific (needs a Mellanox/NVIDIA ConnectX device and libmlx5 DV)',
    'efa': 'EFA-specific (needs an AWS Elastic Fabric Adapter)',
    'cuda': 'CUDA-specific (needs a GPU and CUDA)',
}


def excluded_reason(name):
    lower = name.lower()
    for key, reason in EXCLUDED.items():
        if key in lower:
            return reason
    return None


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


class Result(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.passed = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('-k', dest='pattern', default=None)
    args = ap.parse_args()
    # The suite's own parser reads sys.argv; give it none of ours.
    sys.argv = [sys.argv[0]]
    loader = unittest.TestLoader()
    if args.pattern:
        loader.testNamePatterns = [f'*{args.pattern}*']
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    # The suite's modules import `args_parser` as a top-level module and read its parsed
    # arguments (the defaults: first device, port 1, any GID).
    sys.path.insert(0, os.path.join(here, 'tests'))
    from args_parser import parser
    parser.parse_args()
    names = sorted(f[:-3] for f in os.listdir(os.path.join(here, 'tests'))
                   if f.startswith('test_') and f.endswith('.py'))
    suite = unittest.TestSuite()
    excluded = []
    load_errors = []
    for n in names:
        reason = excluded_reason(n)
        if reason:
            excluded.append((n, reason))
            continue
        try:
            suite.addTests(loader.loadTestsFromName(f'tests.{n}'))
        except Exception as ex:  # an import failure is a failure, not a skip
            load_errors.append((n, repr(ex)))
    tests = []
    for t in iter_tests(suite):
        reason = excluded_reason(t.id())
        if reason:
            excluded.append((t.id(), reason))
        else:
            tests.append(t)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Result, stream=sys.stdout)
    result = runner.run(unittest.TestSuite(tests))
    print()
    print('Excluded by name (vendor-specific):')
    for n, reason in excluded:
        if n.startswith('test_'):
            print(f'  {n}: {reason}')
    print('Skipped, with reasons:')
    reasons = {}
    for t, reason in result.skipped:
        print(f'  SKIP {t.id()}: {reason}')
        reasons[reason] = reasons.get(reason, 0) + 1
    print('Skip reasons (count):')
    for reason, n in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f'  {n:3d}  {reason}')
    failed = len(result.failures) + len(result.errors) + len(load_errors)
    for n, e in load_errors:
        print(f'LOAD ERROR {n}: {e}')
    for t, _ in result.failures + result.errors:
        print(f'FAIL {t.id()}')
    passed = len(result.passed)
    skipped = len(result.skipped)
    print(f'{passed} passed, {failed} failed, {skipped} skipped')
    min_pass = int(os.environ.get('MIN_PASS', '85'))
    if failed:
        sys.exit(1)
    if passed < min_pass:
        print(f'fewer than {min_pass} tests passed', file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    main()
