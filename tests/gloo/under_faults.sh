#!/bin/sh
# Runs a program on the in-process simulator with HCASIM_FAULTS set (random faults on every
# wire) and checks, beyond its own exit status, that frames were really lost on the way: the
# counters it leaves at exit (HCASIM_STATS) add up to at least one injected loss.
#   under_faults.sh PROGRAM [ARGS...]
set -u
[ -n "${HCASIM_FAULTS:-}" ] || { echo "under_faults: set HCASIM_FAULTS"; exit 2; }
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
HCASIM_STATS=$stats "$@"
rc=$?
[ $rc -eq 0 ] || { echo "under_faults: exit status $rc"; exit 1; }
lost=$(awk '$1 == "injected_losses" { s += $2 } END { print s + 0 }' "$stats")
[ "$lost" -gt 0 ] || { echo "under_faults: no frame was lost (counters: $stats)"; cat "$stats"; exit 1; }
echo "under_faults: $lost frames lost on the wires; the program checked its results and passed"
