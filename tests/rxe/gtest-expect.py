#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gtest-expect.py: GoogleTest results on rxe against a list of expected failures.

  gtest-expect.py --tests LIST --output LOG --expected FILE [--title TEXT]

LIST: the tests that should have run, one "Suite.Test" a line (from --gtest_list_tests).
LOG: the programs' combined output. FILE: the tests expected to FAIL on rxe, one a line,
"Suite.Test | why | source" (blank lines and # comments ignored).

Every listed test must have a result line. A test in FILE must fail; any other must pass or be
skipped (GTEST_SKIP). An unexpected failure, an unexpected pass (or skip) of an expected
failure, a missing result and an entry in FILE naming no test all fail: exit 1; else 0.
"""
import argparse
import re
import sys

RESULT = re.compile(r"^\[\s+(OK|FAILED|SKIPPED)\s+\] (\S+) \(\d+ ms\)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--title", default="GoogleTest on rxe")
    a = ap.parse_args()

    tests = [l.strip() for l in open(a.tests, encoding="utf-8") if l.strip()]
    expected = {}
    for n, raw in enumerate(open(a.expected, encoding="utf-8"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 3:
            print(f"gtest-expect: {a.expected}:{n}: want 'Suite.Test | why | source'", file=sys.stderr)
            return 2
        expected[parts[0]] = parts[1]
    results = {}
    for raw in open(a.output, encoding="utf-8", errors="replace"):
        m = RESULT.match(raw.rstrip())
        if m:
            results[m.group(2)] = m.group(1)

    problems, counts = [], {"OK": 0, "SKIPPED": 0, "expected FAILED": 0}
    for t in tests:
        r = results.get(t)
        if t in expected:
            if r == "FAILED":
                counts["expected FAILED"] += 1
            elif r is None:
                problems.append(f"{t}: no result (crashed or hung?); expected to fail on rxe")
            else:
                problems.append(f"{t}: {'passed' if r == 'OK' else 'skipped'} but is listed as failing on rxe "
                                f"({expected[t]}): remove it from {a.expected}")
        else:
            if r in ("OK", "SKIPPED"):
                counts[r] += 1
            elif r == "FAILED":
                problems.append(f"{t}: FAILED on rxe (not an expected failure)")
            else:
                problems.append(f"{t}: no result (crashed or hung?)")
    for t in expected:
        if t not in tests:
            problems.append(f"{a.expected}: '{t}' names no test")
    print(f"== {a.title}: {len(tests)} tests: {counts['OK']} passed, {counts['SKIPPED']} skipped, "
          f"{counts['expected FAILED']} failed as expected on rxe")
    for t in tests:
        if t in expected and results.get(t) == "FAILED":
            print(f"   expected failure {t}: {expected[t]}")
    for p in problems:
        print("   PROBLEM " + p)
    print(f"   {'OK' if not problems else 'FAILED'}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
