#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The auto clock: a single-threaded program stays lockstep for the whole run; one with ranks as
# threads (coll-bench, 2 ranks) switches to realtime when its second thread uses the device, and
# says so in the trace (a "# clock: realtime from here" line) and in --stats.
#
#   clock_auto_test.sh HCASIM SPIN_BETWEEN_POSTS COLL_BENCH
set -u
hcasim=$1 single=$2 bench=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcasim-auto.XXXXXX") || fail mktemp
trap 'rm -rf "$tmp"' EXIT

"$hcasim" run --trace "$tmp/one.trace" --stats -- "$single" 0 >"$tmp/one.out" 2>&1 ||
  { cat "$tmp/one.out"; fail "single-threaded run failed"; }
head -1 "$tmp/one.trace" | grep -q "clock auto" || fail "the trace does not name the auto clock"
grep -q "^clock: auto (lockstep throughout)" "$tmp/one.out" || { cat "$tmp/one.out"; fail "single thread left lockstep"; }
! grep -q "realtime from here" "$tmp/one.trace" || fail "single thread: the trace says it switched"

"$hcasim" run --hosts 2 --trace "$tmp/two.trace" --trace-filter unit=cmd --stats -- \
  "$bench" --ranks-as-threads 2 --op barrier -n 2 -w 1 >"$tmp/two.out" 2>&1 ||
  { cat "$tmp/two.out"; fail "coll-bench run failed"; }
grep -q "^# clock: realtime from here (a second thread uses the device)" "$tmp/two.trace" ||
  fail "threads: no switch line in the trace"
grep -q "^clock: auto, realtime from .* (a second thread uses the device)" "$tmp/two.out" ||
  { cat "$tmp/two.out"; fail "threads: --stats does not report the switch"; }
echo PASS
