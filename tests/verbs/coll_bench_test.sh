#!/bin/sh
# coll-bench under `hcasim run` (the drop-in libibverbs.so.1 replaces rdma-core's), ranks as
# threads, one simulated HCA each. Passes if coll-bench exits 0, printed its table, and every
# checked row says "ok".
#   coll_bench_test.sh HCASIM COLL_BENCH RANKS [coll-bench options...]
set -u
hcasim=$1; bench=$2; ranks=$3; shift 3
out=$("$hcasim" run --hosts "$ranks" -- "$bench" --ranks-as-threads "$ranks" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "coll_bench_test: exit status $rc"; exit 1; }
printf '%s\n' "$out" | grep -q '^# coll-bench:' || { echo "coll_bench_test: no header"; exit 1; }
if printf '%s\n' "$out" | grep -q 'FAIL'; then echo "coll_bench_test: a check failed"; exit 1; fi
rows=$(printf '%s\n' "$out" | grep -c '^ *[0-9]')
[ "$rows" -gt 0 ] || { echo "coll_bench_test: no result rows"; exit 1; }
exit 0
