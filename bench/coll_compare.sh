#!/bin/bash
# coll_compare.sh BUILD_DIR sim|rxe [MODE [CLOCK]] [options]: coll-bench --compare-gloo, the ranks
# as processes, hcasim-verbs against the fastest of Gloo's algorithms at each size (allreduce:
# AllreduceRing, AllreduceRingChunked, AllreduceHalvingDoubling, AllreduceBcube; broadcast:
# BroadcastOneToAll; allgather: AllgatherRing; barrier: BarrierAllToAll), every result checked
# on both sides (the figures in docs/verbs.md). MODE is busy (default) or event.
#   sim: the processes share one simulated fabric (hcasim run ... :::); times are simulated.
#        CLOCK is the time model (hcasim run --clock): auto (default; realtime once a second
#        process connects), lockstep or realtime. The --stats clock line follows each table.
#   rxe: the processes share rxe0 in a QEMU guest (tests/rxe/rxe-vm); times are wall-clock time
#        under TCG emulation, so only the speedup column means something there.
# Options:
#   --ranks LIST     rank counts, comma-separated (default 4,8)
#   --ops LIST       allreduce,broadcast,allgather,barrier (default: all four)
#   --tuning T       coll-bench --tuning: auto (default), hardware or software
#   -b MIN -e MAX    sizes in bytes, doubling (default 8 and 64M)
#   --split SIZE     sizes up to SIZE run -n ITERS -w WARMUP, larger ones -n LITERS -w 1 (default 1M)
#   -n ITERS -w WARMUP    (default 20, 5)   --large-iters LITERS (default 3)
# After each table: the load average, and a summary per size: ours, Gloo's best (its name), the
# speedup (Gloo time / ours) and whether it is at least 1.2.
set -euo pipefail
build=$(cd "$1" && pwd); where=$2; shift 2
mode=busy clock=auto
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then mode=$1; shift; fi
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then clock=$1; shift; fi
ranks=4,8 ops=allreduce,broadcast,allgather,barrier min=8 max=64M split=1M iters=20 warmup=5 liters=3 tuning=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --tuning) tuning=$2; shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    --split) split=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --large-iters) liters=$2; shift 2 ;;
    *) echo "usage: coll_compare.sh BUILD_DIR sim|rxe [busy|event [auto|lockstep|realtime]] [--ranks 4,8]" \
         "[--ops LIST] [--tuning T] [-b MIN] [-e MAX] [--split SIZE] [-n N] [-w N] [--large-iters N]" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
bytes() { numfmt --from=iec "$1"; }
next() { echo $(( $1 * 2 )); }

# One coll-bench run of N processes: prints rank 0's table (and, on the simulator, the clock line).
run() {  # run N ARGS...
  local n=$1; shift
  case "$where" in
    sim)
      local store cmd=() r
      store=$(mktemp -d /tmp/coll-compare.XXXXXX)
      for ((r = 0; r < n; r++)); do
        [ $r -gt 0 ] && cmd+=(:::)
        cmd+=("$build/bin/coll-bench" --rank $r --size "$n" --store "file:$store" "$@")
      done
      "$build/bin/hcasim" run --hosts "$n" --clock "$clock" --stats="$store.stats" -- "${cmd[@]}"
      grep -E '^(clock|lockstep):' "$store.stats" || true
      rm -rf "$store" "$store.stats"
      ;;
    rxe)
      "$here/../tests/rxe/rxe-vm" --build-dir "$build" --boot-timeout 120 --timeout 7200 -- bash -c '
        bench=$1; n=$2; shift 2; store=$(mktemp -d /tmp/cb.XXXXXX); pids=()
        for ((r = 0; r < n; r++)); do
          "$bench" --rank $r --size $n --store "file:$store" --device "$RXE_DEV" "$@" > /tmp/cb.$r 2>&1 &
          pids+=($!)
        done
        rc=0
        for p in "${pids[@]}"; do wait $p || rc=1; done
        cat /tmp/cb.0
        [ $rc -eq 0 ] || for ((r = 1; r < n; r++)); do sed "s/^/[rank $r] /" /tmp/cb.$r; done
        exit $rc' coll-compare "$build/bin/coll-bench" "$n" "$@"
      ;;
    *) echo "coll_compare.sh: where must be sim or rxe" >&2; exit 2 ;;
  esac
}

# The summary of a table: size, ours (algo), Gloo's best (algo), speedup, >= 1.2.
summary() {
  awk '/^ *[0-9]/ && NF == 19 {
         ok = ($18 != "-" && $18 + 0 >= 1.2) ? "yes" : "no"
         printf "#   %10s B  ours %10.2f us (%s)  gloo %10.2f us (%s)  speedup %s  >=1.2: %s\n", $1, $5, $12, $14, $17, $18, ok
       }'
}

smax=$(bytes "$split"); lo=$(bytes "$min"); hi=$(bytes "$max")
IFS=, read -r -a rank_list <<< "$ranks"
IFS=, read -r -a op_list <<< "$ops"
echo "# coll_compare.sh $where mode=$mode clock=$clock tuning=$tuning ranks=$ranks ops=$ops sizes $min..$max; $(date -u +%FT%TZ)"
for n in "${rank_list[@]}"; do
  for op in "${op_list[@]}"; do
    common=(--op "$op" --mode "$mode" --tuning "$tuning" --compare-gloo)
    b=$lo; [ "$op" = allgather ] && [ "$b" -lt $((8 * n)) ] && b=$((8 * n))  # at least 2 floats per rank
    echo "## $op, $n ranks ($where, $mode, clock $clock), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    out=$(mktemp /tmp/coll-compare-out.XXXXXX)
    if [ "$op" = barrier ]; then
      run "$n" "${common[@]}" -n "$iters" -w "$warmup" | tee "$out"
    else
      if [ "$b" -le "$smax" ]; then
        e=$(( hi < smax ? hi : smax ))
        run "$n" "${common[@]}" -b "$b" -e "$e" -f 2 -n "$iters" -w "$warmup" | tee "$out"
      fi
      if [ "$hi" -gt "$smax" ]; then
        b2=$(next "$smax"); [ "$b2" -lt "$b" ] && b2=$b
        run "$n" "${common[@]}" -b "$b2" -e "$hi" -f 2 -n "$liters" -w 1 | tee -a "$out"
      fi
    fi
    echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# summary ($op, $n ranks):"
    summary < "$out"
    rm -f "$out"
  done
done
