#!/usr/bin/env bash
# gloo_abort_rates.sh BUILD_DIR [N]: how often Debian's Gloo (0.5.0, unmodified) aborts at
# teardown, on the simulator and on Soft-RoCE side by side (docs/verbs.md, "Gloo at teardown").
#
# N launches (default 20) of the 4-rank gloo_algorithms job, fresh processes each time
# (tests/gloo/gloo_runs.sh), for
#   every algorithm, --teardown checked   (check the result, then destroy: what applications do)
#   AllreduceRing,   --teardown immediate (destroy right after run(): Gloo's own race)
# in three worlds:
#   threads  the simulator, 4 ranks as threads of one process (hcasim run --hosts 4)
#   fabric   the simulator, 4 processes on one fabric (hcasim run ... ::: ...)
#   rxe      4 processes on rxe0 in one QEMU guest (tests/rxe/rxe-vm, TCG), the system libibverbs
#   rxe-threads  the same guest, 4 ranks as threads of one process (checked teardown): the
#            threads world's counterpart
# The simulator runs with its default clock (realtime as soon as a second thread or process
# uses it). Prints one table: aborts per cell, and whether each simulator world aborts no more
# often than rxe. Per-launch limit: 60 s on the simulator, 120 s in the guest (a launch over
# it counts as a hang). GLOO_RATES_WORLDS picks worlds (e.g. "threads fabric");
# GLOO_RATES_TABLE_FROM=DIR prints the table of an earlier run from its output directory. The rxe world
# takes ~5 s per launch under TCG: about 15 minutes at N=20.
# Exit status: 0 when no launch gave a wrong result or hung, each simulator world aborted no
# more often than rxe over all algorithms (checked teardown), and no algorithm's simulator cell
# is higher than its rxe counterpart beyond chance (one-sided Fisher exact test, p < 0.05; the
# script prints the test for every cell where the simulator's count is higher); 1 otherwise; 2 usage.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bench/gloo_abort_rates.sh BUILD_DIR [N]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
n=${2:-20}
case $n in '' | *[!0-9]* | 0) echo "gloo_abort_rates: N must be a positive integer, got '$n'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
runs=$repo/tests/gloo/gloo_runs.sh
prog=$build/bin/gloo_algorithms
worlds=${GLOO_RATES_WORLDS:-threads fabric rxe}
for w in $worlds; do
  case $w in threads | fabric | rxe) ;; *) echo "gloo_abort_rates: unknown world '$w' (threads, fabric, rxe)" >&2; exit 2 ;; esac
done
[ -x "$prog" ] || { echo "gloo_abort_rates: $prog not built (needs libgloo-dev)" >&2; exit 2; }
if [ -n "${GLOO_RATES_TABLE_FROM:-}" ]; then
  # Print the table of an earlier run again (its output directory), running nothing.
  out=$GLOO_RATES_TABLE_FROM worlds=
  [ -f "$out/threads.checked.txt" ] || [ -f "$out/rxe.checked.txt" ] ||
    { echo "gloo_abort_rates: $out holds no earlier run's outputs" >&2; exit 2; }
else
  out=$(mktemp -d "${TMPDIR:-/tmp}/gloo_rates.XXXXXX")
fi
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
ALGOS="AllreduceRing AllreduceRingChunked AllreduceHalvingDoubling AllreduceBcube BroadcastOneToAll AllgatherRing BarrierAllToAll"

# ---- the runs: $out/WORLD.checked.txt (every algorithm), $out/WORLD.immediate.txt ----------
for w in threads fabric; do
  case " $worlds " in *" $w "*) ;; *) continue ;; esac
  for td in checked immediate; do
    algos=$ALGOS
    [ $td = immediate ] && algos=AllreduceRing
    echo "gloo_abort_rates: simulator ($w), $td teardown, $n launches per algorithm" >&2
    # shellcheck disable=SC2086  # the algorithm list splits on purpose
    "$runs" --launches "$n" --timeout 60 --teardown $td --hcasim "$build/bin/hcasim" \
      --workdir "$out/$w.$td" "$w" "$prog" $algos > "$out/$w.$td.txt" 2>&1
    cat "$out/$w.$td.txt" >&2
  done
done

case " $worlds " in *" rxe "*)
  sysdir=$(ldconfig -p | sed -n 's/.*libibverbs\.so\.1 .*=> \(.*\)\/libibverbs\.so\.1$/\1/p' | grep -v "$build" | head -1)
  [ -n "$sysdir" ] || sysdir=/usr/lib/x86_64-linux-gnu
  echo "gloo_abort_rates: rxe (QEMU guest), $n launches per algorithm and teardown" >&2
  mkdir -p "$out/rxe"
  # One guest for both cases; each gloo_runs.sh's output into its own file in the run dir.
  "$repo/tests/rxe/rxe-vm" --build-dir "$build" --workdir "$out/rxe" --timeout $((n * 15 * 130 + 60)) \
    -e LD_LIBRARY_PATH="$sysdir" -- bash -c '
      for td in checked immediate; do
        algos=$4; [ $td = immediate ] && algos=AllreduceRing
        "$1" --launches "$3" --timeout 120 --teardown $td --workdir "$RXE_WORKDIR/runs.$td" \
          direct "$2" $algos > "$RXE_WORKDIR/rxe.$td.txt" 2>&1
        cat "$RXE_WORKDIR/rxe.$td.txt"
      done
      "$1" --launches "$3" --timeout 120 --workdir "$RXE_WORKDIR/runs.threads" \
        direct-threads "$2" $4 > "$RXE_WORKDIR/rxe-threads.checked.txt" 2>&1
      cat "$RXE_WORKDIR/rxe-threads.checked.txt"' _ "$runs" "$prog" "$n" "$ALGOS" >&2
  for f in rxe.checked rxe.immediate rxe-threads.checked; do cp "$out/rxe/$f.txt" "$out/$f.txt" 2> /dev/null; done ;;
esac

# ---- the table ----------------------------------------------------------------------------
# cell WORLD TEARDOWN ALGO: "aborts/runs" from gloo_runs.sh's row (runs pass abort wrong hang).
cell() {
  local f="$out/$1.$2.txt" r
  [ "$3" = all ] && r=$(sed -n 's/.*RESULT .* runs=\([0-9]*\) pass=[0-9]* abort=\([0-9]*\).*/\1 \2/p' "$f" 2> /dev/null)
  [ "$3" != all ] && r=$(grep -m1 "^$3 " "$f" 2> /dev/null | awk '{print $2, $4}')
  [ -n "$r" ] || { echo "-"; return; }
  set -- $r
  echo "$2/$1"
}
echo
when="$(date -u +%Y-%m-%d), load $(cut -d' ' -f1 /proc/loadavg)"
[ -n "${GLOO_RATES_TABLE_FROM:-}" ] && when="the run in $out"
echo "Gloo 0.5.0 at teardown: 4 ranks, $n launches per cell, aborts/launches ($when)"
row() { printf '%-26s %-10s | %-13s | %-13s | %-13s | %-13s\n' "$@"; }
row algorithm teardown "threads (sim)" "rxe, threads" "fabric (sim)" "rxe, processes"
for a in $ALGOS all; do
  row "$a" checked "$(cell threads checked $a)" "$(cell rxe-threads checked $a)" "$(cell fabric checked $a)" \
    "$(cell rxe checked $a)"
done
row AllreduceRing immediate "$(cell threads immediate AllreduceRing)" - "$(cell fabric immediate AllreduceRing)" \
  "$(cell rxe immediate AllreduceRing)"
echo
for w in threads fabric rxe rxe-threads; do
  f="$out/$w.checked.txt"
  [ -f "$f" ] || continue
  echo "$w: $(grep -h RESULT "$out/$w".*.txt | sed 's/.*RESULT //' | paste -sd ';')"
done
status=0
grep -h RESULT "$out"/*.txt 2> /dev/null | grep -qv ' wrong=0 hang=0 ' && status=1
for w in threads fabric; do
  # Each simulator world against its counterpart on rxe (processes for the fabric, threads for
  # threads when measured, else processes).
  rxe_all=$(cell rxe checked all)
  [ $w = threads ] && [ "$(cell rxe-threads checked all)" != - ] && rxe_all=$(cell rxe-threads checked all)
  s=$(cell $w checked all)
  { [ "$s" = - ] || [ "$rxe_all" = - ]; } && continue
  verdict=no
  [ $((${s%/*} * ${rxe_all#*/})) -le $((${rxe_all%/*} * ${s#*/})) ] && verdict=yes
  [ $verdict = no ] && status=1
  echo "checked teardown, all algorithms: $w aborts no more often than its rxe counterpart: $verdict ($s vs $rxe_all)"
done
# Per algorithm: where a simulator cell has more aborts than its rxe counterpart, is that more
# than chance? One-sided Fisher exact test (the hypergeometric tail: how likely at least the
# simulator's count is if both worlds had the same rate). With near-zero rates and 20 launches,
# 1 against 0 is p = 0.5: noise. p < 0.05 counts as higher and fails the run.
fisher_greater() {  # a/n1 (simulator) against b/n2 (rxe): P(X >= a)
  awk -v a="$1" -v n1="$2" -v b="$3" -v n2="$4" 'function lf(x,  s, i) { s = 0; for (i = 2; i <= x; i++) s += log(i); return s }
    function lc(n, k) { return lf(n) - lf(k) - lf(n - k) }
    BEGIN { K = a + b; N = n1 + n2; p = 0
      for (k = a; k <= K && k <= n1; k++) p += exp(lc(K, k) + lc(N - K, n1 - k) - lc(N, n1))
      printf "%.3f", p }'
}
for a in $ALGOS; do
  for pair in "threads rxe-threads" "fabric rxe"; do
    set -- $pair
    s=$(cell $1 checked $a) r=$(cell $2 checked $a)
    { [ "$s" = - ] || [ "$r" = - ]; } && continue
    [ $((${s%/*} * ${r#*/})) -le $((${r%/*} * ${s#*/})) ] && continue
    p=$(fisher_greater "${s%/*}" "${s#*/}" "${r%/*}" "${r#*/}")
    sig="chance (not significant)"
    awk -v p="$p" 'BEGIN { exit !(p < 0.05) }' && { sig="HIGHER (significant)"; status=1; }
    echo "checked teardown, $a: $1 $s against $2 $r: one-sided Fisher exact p = $p: $sig"
  done
done
echo "(outputs and the logs of launches that did not pass: $out)"
exit $status
