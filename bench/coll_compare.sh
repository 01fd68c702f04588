#!/bin/bash
# coll_compare.sh BUILD_DIR sim|rxe [MODE [CLOCK]]: coll-bench --compare-gloo, 4 ranks as 4
# processes, allreduce of float from 1 KiB to 4 MiB, hcasim-verbs and Debian's Gloo side by side in
# one run (the figures in docs/verbs.md). MODE is busy (default) or event.
#   sim: the processes share one simulated fabric (hcasim run ... :::); times are simulated.
#        CLOCK is the time model (hcasim run --clock): auto (default; realtime once a second
#        process connects), lockstep or realtime. The --stats clock line follows the table.
#   rxe: the processes share rxe0 in a QEMU guest (tests/rxe/rxe-vm); times are wall-clock time
#        under TCG emulation, so only the ratio column means something there.
set -euo pipefail
build=$(cd "$1" && pwd); where=$2; mode=${3:-busy}; clock=${4:-auto}
here=$(cd "$(dirname "$0")" && pwd)
args=(--size 4 --op allreduce --mode "$mode" --compare-gloo -b 1K -e 4M -f 4 -n 10 -w 2)
case "$where" in
  sim)
    store=$(mktemp -d /tmp/coll-compare.XXXXXX)
    cmd=()
    for r in 0 1 2 3; do
      [ $r -gt 0 ] && cmd+=(:::)
      cmd+=("$build/bin/coll-bench" --rank $r --store "file:$store" "${args[@]}")
    done
    "$build/bin/hcasim" run --clock "$clock" --stats="$store.stats" -- "${cmd[@]}"
    grep '^clock:' "$store.stats" || true
    rm -rf "$store" "$store.stats"
    ;;
  rxe)
    "$here/../tests/rxe/rxe-vm" --build-dir "$build" --boot-timeout 120 --timeout 600 -- bash -c '
      bench=$1; shift; store=$(mktemp -d /tmp/cb.XXXXXX); pids=()
      for r in 0 1 2 3; do
        "$bench" --rank $r --store "file:$store" --device "$RXE_DEV" "$@" > /tmp/cb.$r 2>&1 &
        pids+=($!)
      done
      rc=0
      for p in "${pids[@]}"; do wait $p || rc=1; done
      cat /tmp/cb.0
      exit $rc' coll-compare "$build/bin/coll-bench" "${args[@]}"
    ;;
  *) echo "usage: coll_compare.sh BUILD_DIR sim|rxe [busy|event [auto|lockstep|realtime]]" >&2; exit 2 ;;
esac
