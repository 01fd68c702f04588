#!/usr/bin/env bash
# gloo_runs.sh: launches the whole N-rank gloo_algorithms job K times back to back (fresh
# processes and a fresh store each time) for each given algorithm, and counts per algorithm
# how the launches ended: pass, abort (which message), wrong result, hang.
#
#   tests/gloo/gloo_runs.sh [options] WORLD PROG [ALGO ...]     (no ALGO, or "all": all seven)
#
# WORLD:
#   threads  one process, ranks as threads:  hcasim run --hosts N -- PROG --threads N
#   fabric   N processes on one fabric:      hcasim run -- PROG --rank 0 ... ::: PROG --rank 1 ...
#   direct   N plain processes, no hcasim (e.g. inside the rxe guest: tests/rxe/rxe-vm), all on
#            --device (default $RXE_DEV, else rxe0)
#   direct-threads  one plain process, ranks as threads, all on --device (the threads world's
#            counterpart on a real device)
#
# options:
#   --launches K       launches per algorithm (default 20)
#   --ranks N          ranks (default 4)
#   --teardown MODE    checked (default) | immediate (gloo_algorithms --teardown)
#   --timeout S        limit per launch in seconds (default 60): a launch still running then is
#                      killed (its whole process group) and counted as a hang
#   --hcasim PATH      hcasim binary (threads, fabric; default: PROG's directory's hcasim, else
#                      hcasim on PATH)
#   --hcasim-opt OPT   one more option for `hcasim run` (repeatable; e.g. --clock realtime)
#   --device NAME      the device every rank uses (direct, direct-threads; default $RXE_DEV or rxe0)
#   --workdir DIR      where stores and logs go (default: a fresh mktemp directory); the output
#                      of every launch that did not pass is kept as ALGO.LAUNCH.log there
#   --fail-on-abort    exit 1 on any abort too (default: only on a wrong result or a hang)
#   -v                 one line per launch
#   -- ARGS...         further gloo_algorithms options (e.g. --count 1000)
#
# Output: one line per algorithm (runs, pass, abort, wrong, hang, and the abort messages with
# their counts), then "gloo_runs: RESULT ..." with the totals.
# Exit status: 0 no wrong result and no hang (and with --fail-on-abort no abort); 1 otherwise;
# 2 usage error.
set -uo pipefail

ALL="AllreduceRing AllreduceRingChunked AllreduceHalvingDoubling AllreduceBcube BroadcastOneToAll AllgatherRing BarrierAllToAll"
launches=20 ranks=4 teardown=checked timeout_s=60 hcasim="" device="${RXE_DEV:-rxe0}" workdir=""
fail_on_abort=0 verbose=0
hopts=() extra=()

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
die() { echo "gloo_runs: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case $1 in
    --launches) launches=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --teardown) teardown=${2:?}; shift 2 ;;
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --hcasim) hcasim=${2:?}; shift 2 ;;
    --hcasim-opt) hopts+=("${2:?}"); shift 2 ;;
    --device) device=${2:?}; shift 2 ;;
    --workdir) workdir=${2:?}; shift 2 ;;
    --fail-on-abort) fail_on_abort=1; shift ;;
    -v) verbose=1; shift ;;
    -h|--help) usage ;;
    --) shift; extra=("$@"); set --; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || usage
world=$1 prog=$2
shift 2
# ALGO arguments end at "--" (the program's own options follow).
algos=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then shift; extra=("$@"); break; fi
  algos+=("$1"); shift
done
if [ ${#algos[@]} -eq 0 ] || [ "${algos[*]}" = all ]; then read -ra algos <<< "$ALL"; fi
for a in "${algos[@]}"; do
  case " $ALL " in *" $a "*) ;; *) die "unknown algorithm '$a' (one of: $ALL)" ;; esac
done
case $world in threads|fabric|direct|direct-threads) ;;
  *) die "WORLD must be threads, fabric, direct or direct-threads, got '$world'" ;;
esac
case $teardown in checked|immediate) ;; *) die "--teardown: checked or immediate, got '$teardown'" ;; esac
for v in "$launches" "$ranks" "$timeout_s"; do
  case $v in ''|*[!0-9]*) die "--launches, --ranks, --timeout take positive integers" ;; esac
done
[ -x "$prog" ] || die "not an executable: $prog"
if [ "${world#direct}" = "$world" ]; then
  if [ -z "$hcasim" ]; then
    if [ -x "$(dirname "$prog")/hcasim" ]; then hcasim=$(dirname "$prog")/hcasim; else hcasim=$(command -v hcasim || true); fi
  fi
  [ -n "$hcasim" ] && [ -x "$hcasim" ] || die "no hcasim binary (give --hcasim PATH)"
fi
command -v timeout > /dev/null || die "timeout(1) (coreutils) is needed"
if [ -z "$workdir" ]; then
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/gloo_runs.XXXXXX") || die "mktemp failed"
fi
mkdir -p "$workdir" || die "cannot create $workdir"

# ---- one launch ---------------------------------------------------------------------------

# launch ALGO LOG: runs the whole job once, all output (every rank's) into LOG; sets $rc (the
# job's status; 124 when the time limit was hit) and, in the direct world, $rank_rcs.
launch() {
  local algo=$1 log=$2 store r
  store=$(mktemp -d "$workdir/store.XXXXXX")
  local common=(--algo "$algo" --teardown "$teardown" "${extra[@]}")
  rank_rcs=""
  case $world in
    threads)
      timeout -k 5 "$timeout_s" "$hcasim" run --hosts "$ranks" "${hopts[@]}" -- \
        "$prog" --threads "$ranks" --store "$store" "${common[@]}" > "$log" 2>&1
      rc=$? ;;
    fabric)
      local args=()
      for ((r = 0; r < ranks; r++)); do
        [ $r -gt 0 ] && args+=(:::)
        args+=("$prog" --rank "$r" --size "$ranks" --store "$store" "${common[@]}")
      done
      timeout -k 5 "$timeout_s" "$hcasim" run "${hopts[@]}" -- "${args[@]}" > "$log" 2>&1
      rc=$? ;;
    direct-threads)
      { timeout -k 5 "$timeout_s" "$prog" --threads "$ranks" --store "$store" --device "$device" \
        "${common[@]}" > "$log" 2>&1; } 2> /dev/null  # no "Aborted" job report from bash
      rc=$?
      [ $rc -gt 128 ] && [ $rc -ne 137 ] && echo "gloo_runs: died of signal $((rc - 128))" >> "$log" ;;
    direct)
      # One time limit per rank (each its own timeout(1), all started together).
      local pids=()
      for ((r = 0; r < ranks; r++)); do
        timeout -k 5 "$timeout_s" "$prog" --rank "$r" --size "$ranks" --store "$store" --device "$device" \
          "${common[@]}" > "$log.rank$r" 2>&1 &
        pids+=($!)
      done
      rc=0
      for ((r = 0; r < ranks; r++)); do
        { wait "${pids[$r]}"; } 2> /dev/null  # no "Aborted" job report from bash
        local st=$?
        rank_rcs+=" $st"
        if [ $st -eq 124 ] || [ $st -eq 137 ]; then rc=124; elif [ $rc -eq 0 ]; then rc=$st; fi
        [ $st -gt 128 ] && [ $st -ne 137 ] && echo "gloo_runs: rank $r died of signal $((st - 128))" >> "$log.rank$r"
      done
      for ((r = 0; r < ranks; r++)); do sed "s/^/[rank $r] /" "$log.rank$r"; rm -f "$log.rank$r"; done > "$log" ;;
  esac
  rm -rf "$store"
}

# classify LOG: prints "pass", "wrong", "hang" or "abort<TAB>message[<TAB>message...]".
classify() {
  local log=$1 passes msgs
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo hang; return; fi
  if grep -q 'gloo_algorithms: WRONG' "$log"; then echo wrong; return; fi
  passes=$(grep -c 'gloo_algorithms: PASS' "$log")
  if [ "$rc" -eq 0 ] && [ "$passes" -eq "$ranks" ]; then echo pass; return; fi
  # Messages, one kind each: Gloo's enforce messages (file:line and the condition, which has
  # the values), Gloo exceptions caught by the program, deaths by signal.
  msgs=$(
    {
      sed -n 's/.*\[enforce fail at [^]]*\/\([^/]*:[0-9]*\)\] \(.*\)/\1 \2/p' "$log" | cut -c1-90
      grep -o 'gloo_algorithms: ERROR .*' "$log" | sed 's/.*: \(gloo::[A-Za-z]*\|exception\): /exception \1: /' | cut -c1-90
      # hcasim run says "died of signal 6 (Aborted)", the direct world "died of signal 6".
      for sig in $(grep -o "died of signal [0-9]*" "$log" | sed 's/.* //' | sort -u); do
        echo "signal $sig (SIG$(kill -l "$sig" 2> /dev/null))"
      done
    } | sort -u | paste -sd '\t'
  )
  [ -n "$msgs" ] || msgs="exit status $rc, $passes of $ranks ranks passed, no message"
  printf 'abort\t%s\n' "$msgs"
}

# ---- the runs -----------------------------------------------------------------------------

echo "gloo_runs: world=$world ranks=$ranks launches=$launches teardown=$teardown timeout=${timeout_s}s" \
  "${hopts[*]:+hcasim-opts='${hopts[*]}' }${extra[*]:+args='${extra[*]}' }workdir=$workdir"
printf '%-26s %5s %5s %6s %6s %5s  %s\n' algorithm runs pass abort wrong hang "abort messages (launches)"
tot_runs=0 tot_pass=0 tot_abort=0 tot_wrong=0 tot_hang=0
for algo in "${algos[@]}"; do
  n_pass=0 n_abort=0 n_wrong=0 n_hang=0
  declare -A msgcount=()
  t0=$(date +%s%N)
  for ((k = 1; k <= launches; k++)); do
    log="$workdir/$algo.$k.log"
    launch "$algo" "$log"
    verdict=$(classify "$log")
    kind=${verdict%%$'\t'*}
    case $kind in
      pass) n_pass=$((n_pass + 1)); rm -f "$log" ;;
      wrong) n_wrong=$((n_wrong + 1)) ;;
      hang) n_hang=$((n_hang + 1)) ;;
      abort)
        n_abort=$((n_abort + 1))
        IFS=$'\t' read -ra parts <<< "${verdict#abort$'\t'}"
        for m in "${parts[@]}"; do msgcount[$m]=$((${msgcount[$m]:-0} + 1)); done ;;
    esac
    [ $verbose -eq 1 ] && printf 'gloo_runs: %s launch %d: %s (status %s%s)\n' "$algo" "$k" \
      "$(echo "$verdict" | tr '\t' ';')" "$rc" "${rank_rcs:+, ranks:$rank_rcs}" >&2
  done
  ms=$((($(date +%s%N) - t0) / 1000000))
  msgs=""
  for m in "${!msgcount[@]}"; do msgs+="${msgs:+; }$m (${msgcount[$m]})"; done
  unset msgcount
  printf '%-26s %5d %5d %6d %6d %5d  %s\n' "$algo" "$launches" $n_pass $n_abort $n_wrong $n_hang "${msgs:--}"
  [ $verbose -eq 1 ] && printf 'gloo_runs: %s: %d ms for %d launches\n' "$algo" "$ms" "$launches" >&2
  tot_runs=$((tot_runs + launches)) tot_pass=$((tot_pass + n_pass)) tot_abort=$((tot_abort + n_abort))
  tot_wrong=$((tot_wrong + n_wrong)) tot_hang=$((tot_hang + n_hang))
done

status=0
[ $((tot_wrong + tot_hang)) -gt 0 ] && status=1
[ $fail_on_abort -eq 1 ] && [ $tot_abort -gt 0 ] && status=1
echo "gloo_runs: RESULT world=$world teardown=$teardown runs=$tot_runs pass=$tot_pass abort=$tot_abort" \
  "wrong=$tot_wrong hang=$tot_hang -> $([ $status -eq 0 ] && echo ok || echo FAIL)"
[ $((tot_runs - tot_pass)) -gt 0 ] && echo "gloo_runs: the logs of the launches that did not pass are in $workdir"
exit $status
