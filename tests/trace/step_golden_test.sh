#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A golden step-mode session: run a program under `hcasim run --step-script SCRIPT` and compare
# the whole transcript (events, commands, answers, the program's output) with
# the golden file, byte for byte. docs/reading-a-trace.md quotes it (docs.trace_excerpts).
#
#   step_golden_test.sh [--update] HCASIM PROGRAM SCRIPT GOLDEN
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
hcasim=${1:?hcasim}; prog=${2:?program}; script=${3:?script}; golden=${4:?golden}
pre=()
[ -n "${HCASIM_TEST_PRELOAD:-}" ] && pre=(env LD_PRELOAD="$HCASIM_TEST_PRELOAD")
out=$(mktemp "${TMPDIR:-/tmp}/hcasim-step.XXXXXX") || fail mktemp
trap 'rm -f "$out"' EXIT
timeout 60 "${pre[@]}" "$hcasim" run --idle-us 0 --step-script "$script" -- "$prog" >"$out" 2>&1 ||
  { cat "$out" >&2; fail "the step session failed"; }
if [ $update = 1 ]; then
  cp "$out" "$golden" && echo "updated $golden" && exit 0
fi
cmp -s "$out" "$golden" || { diff -u "$golden" "$out" | head -60 >&2; fail "step session differs from $golden (--update if intended)"; }
echo "$(basename "$golden"): identical"
