#!/bin/sh
# Kill test of the cross-process fabric (issue #4), on one long-running fabric that plain
# processes join with HCASIM_FABRIC (no hcasim run):
#  1. four coll-bench ranks; rank 2 is killed with SIGKILL mid-run. The three survivors must
#     end with an error, not hang. A survivor that still had a send in flight to rank 2 gets a
#     work-completion error (retry exceeded); one that only waits to receive from it (its
#     neighbours in the ring are stuck behind it) gets the transport's wait timeout. Which is
#     which depends on where the ring was at the kill.
#  2. an ib_write_bw pair streaming; the server is killed. The client has writes in flight, so
#     it must get IBV_WC_RETRY_EXC_ERR (perftest: "Failed status 12"), as on hardware.
#  3. the fabric is still up with every slot free, and a new four-rank run passes.
#   kill_test.sh HCASIM COLL_BENCH WORKDIR
set -u
hcasim=$1; bench=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
sock="$work/fabric.sock"
fail() { echo "kill_test: $*"; "$hcasim" fabric status --socket "$sock" 2>/dev/null; "$hcasim" fabric stop --socket "$sock" >/dev/null 2>&1; exit 1; }

"$hcasim" fabric start --socket "$sock" --hosts 4 --stats-json "$work/stats.json" || fail "fabric start failed"
libdir=$(cd "$(dirname "$hcasim")/../lib" && pwd)

# Run 1: long enough that rank 2 dies mid-run.
mkdir -p "$work/store1"
for r in 0 1 2 3; do
  HCASIM_FABRIC=$sock LD_LIBRARY_PATH=$libdir SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 \
    "$bench" --rank $r --size 4 --store "file:$work/store1" -b 64K -e 64K -n 100000 -w 1 \
      --timeout-ms 8000 > "$work/rank$r.log" 2>&1 &
  eval "pid$r=\$!"
done
# Wait until every rank has printed its header (they are connected and running).
i=0
while [ $(cat "$work"/rank*.log 2>/dev/null | grep -c '^# coll-bench:') -lt 1 ]; do
  i=$((i + 1)); [ $i -gt 600 ] && fail "the ranks never started"
  sleep 0.1
done
sleep 1
"$hcasim" fabric status --socket "$sock" | grep -q "4 of 4 hosts in use" || fail "expected 4 hosts in use before the kill"
kill -9 "$pid2"
echo "kill_test: killed rank 2 (pid $pid2)"
start=$(date +%s)
for r in 0 1 3; do
  eval "p=\$pid$r"
  wait "$p"; rc=$?
  [ $rc -ne 0 ] || fail "rank $r exited 0 after its peer died"
  [ $rc -lt 128 ] || fail "rank $r died of a signal ($rc) instead of reporting an error"
  echo "kill_test: rank $r exited with $rc: $(grep -m1 -iE 'error|timed out|timeout' "$work/rank$r.log")"
done
took=$(( $(date +%s) - start ))
echo "kill_test: survivors ended ${took}s after the kill"

# Phase 2: a streaming writer whose peer dies gets an error completion.
port=${KILL_TEST_PORT:-18680}
HCASIM_FABRIC=$sock LD_LIBRARY_PATH=$libdir SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 \
  ib_write_bw -F -D 20 -p "$port" > "$work/bw_server.log" 2>&1 &
server=$!
"$(dirname "$0")/wait-port" "$port" true || fail "ib_write_bw server did not listen"
HCASIM_FABRIC=$sock LD_LIBRARY_PATH=$libdir SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 \
  ib_write_bw -F -D 20 -p "$port" localhost > "$work/bw_client.log" 2>&1 &
client=$!
sleep 2
kill -9 "$server"
start=$(date +%s)
wait "$client"; rc=$?
[ $rc -ne 0 ] || fail "ib_write_bw client exited 0 after its server died"
grep -q 'Failed status 12' "$work/bw_client.log" || { cat "$work/bw_client.log"; fail "the client saw no IBV_WC_RETRY_EXC_ERR"; }
echo "kill_test: ib_write_bw client: $(grep -m1 'Failed status' "$work/bw_client.log" | sed 's/^ *//') ($(( $(date +%s) - start ))s after the kill)"

"$hcasim" fabric status --socket "$sock" > "$work/status.txt" || fail "the fabric did not survive"
cat "$work/status.txt"
grep -q "0 of 4 hosts in use" "$work/status.txt" || fail "host slots were not reclaimed"

# Run 2: the same fabric, a fresh run through hcasim run --join.
mkdir -p "$work/store2"
"$hcasim" run --join "$sock" -- "$bench" --rank 0 --size 4 --store "file:$work/store2" -b 8 -e 64K -f 8 \
  ::: "$bench" --rank 1 --size 4 --store "file:$work/store2" -b 8 -e 64K -f 8 \
  ::: "$bench" --rank 2 --size 4 --store "file:$work/store2" -b 8 -e 64K -f 8 \
  ::: "$bench" --rank 3 --size 4 --store "file:$work/store2" -b 8 -e 64K -f 8 > "$work/run2.log" 2>&1 \
  || { cat "$work/run2.log"; fail "the run after the kill failed"; }
grep -q ' ok$' "$work/run2.log" || fail "the run after the kill printed no verified rows"
"$hcasim" fabric stop --socket "$sock" || fail "fabric stop failed"
[ -s "$work/stats.json" ] || fail "the fabric wrote no counters at stop"
echo "kill_test: passed"
