#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Golden step traces: run a scenario twice under `hcasim run` and compare the readable trace
# byte for byte with the other run and with the golden file. The other outputs (timeline,
# VCD, pcap, JSON counters) must also be byte-identical between the two runs.
#
#   golden_test.sh [--update] HCASIM SCENARIO GOLDEN
#
# --update writes the golden file from the first run (after checking that both runs agree).
# Regenerate every golden at once:  cmake --build --preset default --target trace_golden_update
# Exit 0 pass, 1 fail.
set -u

fail() { echo "FAIL: $*" >&2; exit 1; }

update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
hcasim=${1:?path to hcasim}
prog=${2:?path to the scenario program}
golden=${3:?golden trace file}
[ -x "$hcasim" ] || fail "no hcasim at $hcasim"
[ -x "$prog" ] || fail "no scenario program at $prog"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcasim-golden.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

# Sanitizer builds: HCASIM_TEST_PRELOAD names a runtime the (unsanitized) scenario must load first.
pre=()
[ -n "${HCASIM_TEST_PRELOAD:-}" ] && pre=(env LD_PRELOAD="$HCASIM_TEST_PRELOAD")

for run in 1 2; do
  d=$tmp/run$run
  mkdir -p "$d"
  # --clock lockstep --idle-us 0: simulated time advances only inside verbs calls (no wall-clock
  # fallback).
  if ! timeout 60 "${pre[@]}" "$hcasim" run --clock lockstep --idle-us 0 --seed 1 --trace "$d/trace" --timeline "$d/timeline.json" \
       --vcd "$d/signals.vcd" --pcap "$d/wire.pcap" --stats-json "$d/stats.json" -- "$prog" >"$d/out" 2>&1; then
    cat "$d/out" >&2
    fail "run $run of $(basename "$prog") failed"
  fi
done
for f in trace timeline.json signals.vcd wire.pcap stats.json; do
  cmp -s "$tmp/run1/$f" "$tmp/run2/$f" || {
    diff -u "$tmp/run1/$f" "$tmp/run2/$f" | head -40 >&2
    fail "$f differs between two runs of the same program and seed"
  }
done
if [ $update = 1 ]; then
  cp "$tmp/run1/trace" "$golden" || fail "cannot write $golden"
  echo "updated $golden ($(wc -l <"$golden") lines)"
  exit 0
fi
[ -f "$golden" ] || fail "no golden file $golden (create it with --update)"
if ! cmp -s "$golden" "$tmp/run1/trace"; then
  diff -u "$golden" "$tmp/run1/trace" | head -80 >&2
  fail "trace differs from $golden; if the change is intended: $0 --update $hcasim $prog $golden"
fi
echo "$(basename "$golden"): identical ($(wc -l <"$golden") lines), outputs deterministic"
