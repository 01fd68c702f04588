#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Software time in the two clocks: spin_between_posts posts a WRITE, computes for SPIN_US of
# wall time, posts another. The trace's SQ doorbells of hcasim0 must be exactly 0 ns apart in
# lockstep (software time is free there) and at least SPIN_US - 5 us apart in realtime (the
# device may lead the wall clock by up to 5 us, clock.h kLeadPs), and no more than the wall time
# the program measured between its posts plus the commands' time and 50 ms (a loaded machine
# may preempt the program, which on hardware would take as long).
#
# With PD_PAIRS > 0 the program also allocates and frees a PD that many times between the posts:
# 2 x PD_PAIRS firmware commands, each taking the profile's command time (20 us) in realtime
# and nothing in lockstep; the realtime gap must then cover them too.
#
#   clock_test.sh HCASIM SPIN_BETWEEN_POSTS [SPIN_US [PD_PAIRS]]
set -u
hcasim=$1 prog=$2 spin=${3:-20} pd_pairs=${4:-0}
command_us=20  # the default profile's firmware command (hcasim profiles)
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcasim-clock.XXXXXX") || fail mktemp
trap 'rm -rf "$tmp"' EXIT

# The two SQ doorbells' simulated times (ns) on hcasim0, one per line.
doorbells() {
  awk '!/^#/ && $2 == "hcasim0" && $3 == "doorbell" && /SQ (doorbell|BlueFlame)/ {print $1}' "$1"
}
gap_ns() {  # the second doorbell's time minus the first's, in ns (integer)
  doorbells "$1" | awk 'NR==1 {a=$1} NR==2 {b=$1} END {if (NR != 2) print "none"; else printf "%d\n", b - a}'
}

for mode in lockstep realtime; do
  "$hcasim" run --clock "$mode" --idle-us 0 --trace "$tmp/$mode.trace" --trace-filter unit=doorbell --stats \
    -- "$prog" "$spin" "$pd_pairs" >"$tmp/$mode.out" 2>&1 || { cat "$tmp/$mode.out"; fail "$mode run failed"; }
  head -1 "$tmp/$mode.trace" | grep -q "clock $mode" || fail "$mode: the trace does not name its clock"
  grep -q "^clock: $mode" "$tmp/$mode.out" || fail "$mode: --stats does not name its clock"
  gap=$(gap_ns "$tmp/$mode.trace")
  [ "$gap" != none ] || { cat "$tmp/$mode.trace"; fail "$mode: expected two SQ doorbells on hcasim0"; }
  echo "$mode: second doorbell $gap ns after the first ($spin us of computation and $((2 * pd_pairs))" \
    "firmware commands between the posts)"
  eval "gap_$mode=$gap"
done
[ "$gap_lockstep" -eq 0 ] || fail "lockstep: doorbells $gap_lockstep ns apart, expected 0"
expect_us=$((spin + 2 * pd_pairs * command_us))
[ "$gap_realtime" -ge $(( (expect_us - 5) * 1000 )) ] || fail "realtime: doorbells only $gap_realtime ns apart"
wall_ns=$(sed -n 's/^spin_between_posts: wall time between the posts: \([0-9]*\) ns$/\1/p' "$tmp/realtime.out")
[ -n "$wall_ns" ] || fail "realtime: the program printed no wall time between its posts"
[ "$gap_realtime" -le $(( wall_ns + expect_us * 1000 + 50000000 )) ] ||
  fail "realtime: doorbells $gap_realtime ns apart, the program saw $wall_ns ns of wall time between its posts"
grep -q "simulated s per wall s" "$tmp/realtime.out" || fail "realtime: --stats has no slowdown figure"
grep -q "firmware commands, " "$tmp/realtime.out" || fail "realtime: --stats does not count firmware commands"
echo "PASS"
