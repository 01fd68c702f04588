#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Core hand-off (driver/provider/handoff.h): in the realtime clock, a thread whose doorbell
# raises a completion event for another thread's completion channel lets that thread handle it
# before ibv_post_send returns, as a core of its own would on hardware. channel_reader counts
# the rounds where that happened (K of N). Checked:
#   realtime, reader thread, in-process and on the fabric: K >= N/2, and at least N/2
#     "handoff:" notes in the trace (the first round cannot hand off: the reader is not known
#     until it has taken an event);
#   realtime, reader = the poster itself: no hand-off note (nobody else to run);
#   lockstep, reader thread: no hand-off note (interrupts are not raised inside the doorbell).
#
# The first check is about wall time (the hand-off waits at most 250 us): with TIMING=no (a
# sanitizer build, ~10x slower) K is printed but not checked; the rest is checked always.
#
#   handoff_test.sh HCASIM CHANNEL_READER [TIMING (yes|no, default yes)]
set -u
hcasim=$1 prog=$2 timing=${3:-yes}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcasim-handoff.XXXXXX") || fail mktemp
trap 'rm -rf "$tmp"' EXIT
n=200

# run NAME ROUNDS READER HCASIM-OPTIONS...: run it, leave NAME.out and NAME.trace.
run() {
  local name=$1 rounds=$2 reader=$3
  shift 3
  "$hcasim" run "$@" --trace "$tmp/$name.trace" --trace-filter unit=driver -- \
    "$prog" --reader "$reader" --rounds "$rounds" > "$tmp/$name.out" 2>&1 ||
    { cat "$tmp/$name.out"; fail "$name: the run failed"; }
  cat "$tmp/$name.out"
}
early() { sed -n 's/.*returned: \([0-9]*\) of.*/\1/p' "$tmp/$1.out"; }
notes() { grep -c 'note .*handoff:' "$tmp/$1.trace"; }

run inproc $n thread --clock realtime --hosts 2
run fabric $n thread --clock realtime --fabric --hcas-per-host 2
for w in inproc fabric; do
  k=$(early $w)
  [ -n "$k" ] || fail "$w: no result line"
  [ "$timing" = no ] || [ "$k" -ge $((n / 2)) ] ||
    fail "$w: the reader handled only $k of $n completions before ibv_post_send returned"
  h=$(notes $w)
  [ "$h" -ge $((n / 2)) ] || fail "$w: only $h hand-off notes in the trace for $n rounds"
  echo "$w: $k of $n handled before the post returned, $h hand-offs"
done
grep -m1 'note .*handoff:' "$tmp/inproc.trace"

run same $n same --clock realtime --hosts 2
[ "$(notes same)" -eq 0 ] || fail "same thread: hand-off notes with nobody to hand off to"
run lockstep 20 thread --clock lockstep --hosts 2
[ "$(notes lockstep)" -eq 0 ] || fail "lockstep: hand-off notes"
echo PASS
