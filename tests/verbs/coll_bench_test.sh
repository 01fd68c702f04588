#!/bin/sh
# coll-bench under `hcasim run` (the drop-in libibverbs.so.1 replaces rdma-core's), ranks as
# threads, one simulated HCA each. Passes if coll-bench exits 0, printed its table, and every
# checked row says "ok". With --algo A (not auto): every row's algo column says A. With
# --compare-gloo also: the Gloo header is there, every row has Gloo's columns, Gloo ran at some
# size, and wherever ours was checked and Gloo ran, Gloo's check says "ok".
# With HCASIM_FAULTS set (random faults on every wire, docs/fabric.md): also that frames were
# really lost (the counters of `hcasim run --stats`), so the checks ran over a lossy wire.
#   coll_bench_test.sh HCASIM COLL_BENCH RANKS [coll-bench options...]
set -u
hcasim=$1; bench=$2; ranks=$3; shift 3
gloo=0 algo=auto prev=
for a in "$@"; do
  [ "$a" = "--compare-gloo" ] && gloo=1
  [ "$prev" = "--algo" ] && algo=$a
  prev=$a
done
stats=
[ -n "${HCASIM_FAULTS:-}" ] && stats=--stats
out=$("$hcasim" run --hosts "$ranks" $stats -- "$bench" --ranks-as-threads "$ranks" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "coll_bench_test: exit status $rc"; exit 1; }
printf '%s\n' "$out" | grep -q '^# coll-bench:' || { echo "coll_bench_test: no header"; exit 1; }
if printf '%s\n' "$out" | grep -q 'FAIL'; then echo "coll_bench_test: a check failed"; exit 1; fi
rows=$(printf '%s\n' "$out" | grep -c '^ *[0-9]')
[ "$rows" -gt 0 ] || { echo "coll_bench_test: no result rows"; exit 1; }
if [ "$algo" != auto ]; then
  other=$(printf '%s\n' "$out" | grep '^ *[0-9]' | awk -v a="$algo" '$12 != a' | wc -l)
  [ "$other" -eq 0 ] || { echo "coll_bench_test: $other rows ran another algorithm than --algo $algo"; exit 1; }
fi
if [ $gloo -eq 1 ]; then
  printf '%s\n' "$out" | grep -q '^# compare: Gloo' || { echo "coll_bench_test: no Gloo header"; exit 1; }
  # Data rows: 13 columns of ours (the 13th our check) + 6 of Gloo's (14 gloo(us), 17 gloo_algo,
  # 19 Gloo's check).
  bad=$(printf '%s\n' "$out" | grep '^ *[0-9]' |
    awk 'NF != 19 || ($19 != "ok" && $19 != "-") || ($13 == "ok" && $14 != "-" && $19 != "ok")' | wc -l)
  [ "$bad" -eq 0 ] || { echo "coll_bench_test: $bad rows without Gloo's columns or check"; exit 1; }
  ran=$(printf '%s\n' "$out" | grep '^ *[0-9]' | awk '$14 != "-" && $17 != "-"' | wc -l)
  [ "$ran" -gt 0 ] || { echo "coll_bench_test: Gloo ran no size"; exit 1; }
fi
if [ -n "$stats" ]; then
  lost=$(printf '%s\n' "$out" | awk '$1 == "injected_losses" { s += $2 } END { print s + 0 }')
  [ "$lost" -gt 0 ] || { echo "coll_bench_test: HCASIM_FAULTS set but no frame was lost"; exit 1; }
  echo "coll_bench_test: $lost frames lost on the wires, every result checked"
fi
exit 0
