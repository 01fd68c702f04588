#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trace excerpts in the docs are real output: every fenced block marked
`<!-- excerpt: PATH -->` must consist of lines of the file PATH (a golden trace, itself
compared byte for byte with what the simulator prints), in the file's order. Trailing spaces
are ignored. Usage: trace_excerpts_test.py SOURCE_DIR DOC.md..."""
import re
import sys


def check(root, doc):
    text = open(f"{root}/{doc}").read()
    blocks = re.findall(r"<!-- excerpt: (\S+) -->\n```\n(.*?)```", text, re.S)
    errors = []
    for path, body in blocks:
        src = [line.rstrip() for line in open(f"{root}/{path}").read().split("\n")]
        at = 0
        for line in body.rstrip("\n").split("\n"):
            try:
                at = src.index(line.rstrip(), at) + 1
            except ValueError:
                errors.append(f"{doc}: line not in {path} (or out of order):\n  {line}")
                break
    return len(blocks), errors


def main():
    root, docs = sys.argv[1], sys.argv[2:]
    total, errors = 0, []
    for d in docs:
        n, e = check(root, d)
        total += n
        errors += e
    for e in errors:
        print(e)
    if total == 0:
        print("no excerpt blocks found: the markers were lost")
        return 1
    print(f"{total} excerpt block(s) checked, {len(errors)} drifted")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
