#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A process that ends with a send in flight is told so (lockstep clock, where the send cannot
# complete while the program does not wait): exit_in_flight posts one RDMA WRITE and then
#   wait   -> no hazard;
#   exit   -> "hazard: the process ended with QP 0x.. 's 1 unacknowledged RDMA_WRITE (WQE 0, ...,
#             from the buffer at 0x... (lkey 0x..., 64 bytes)) in flight";
#   abort  -> the same, "the process (signal 6) ended with ...";
#   own    -> the program's own SIGABRT handler runs (the simulator installs its report only
#             where a program has not set a handler) and exits 3.
# In-process (the world reports at exit or on the fatal signal) and on the fabric (the device
# reports when the host's process is gone: "process PID ended with ...").
#
#   exit_in_flight_test.sh HCASIM EXIT_IN_FLIGHT
set -u
hcasim=$1 prog=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcasim-exit.XXXXXX") || fail mktemp
trap 'rm -rf "$tmp"' EXIT

for world in inproc fabric; do
  opts=(--clock lockstep --idle-us 0 --hosts 2)
  # (on the fabric, time moves on after 200 us without calls by default: not while this runs)
  [ $world = fabric ] && opts=(--clock lockstep --quiet-us 1000000 --fabric --hcas-per-host 2)
  for how in wait exit abort; do
    out=$tmp/$world.$how
    "$hcasim" run "${opts[@]}" -- "$prog" $how > "$out" 2>&1
    qpn=$(sed -n 's/.*QP \(0x[0-9a-f]*\) posted.*/\1/p' "$out")
    buf=$(sed -n 's/.*the buffer at \(0x[0-9a-f]*\) (lkey \(0x[0-9a-f]*\)).*/\1 (lkey \2, 64 bytes)/p' "$out")
    [ -n "$qpn" ] && [ -n "$buf" ] || { cat "$out"; fail "$world $how: the program did not run"; }
    line=$(grep 'hazard:' "$out")
    echo "$world $how: ${line:-no hazard}"
    if [ $how = wait ]; then
      [ -z "$line" ] || fail "$world wait: a hazard for a program that waited for its completion"
      continue
    fi
    who="the process ended"
    [ $how = abort ] && who="the process (signal 6) ended"
    [ $world = fabric ] && who="process [0-9]* ended"
    sent="hazard: $who with QP $qpn's 1 unacknowledged RDMA_WRITE (WQE 0, PSN [0-9]*\.\.[0-9]*, from the buffer at $buf) in flight"
    # On the fabric the program's one wait may also end after the ACK came back: then what it
    # leaves is the completion, never polled.
    [ $world = fabric ] && sent="$sent\|hazard: $who with 1 CQE of CQ [0-9]* never polled"
    echo "$line" | grep -q "$sent" ||
      { cat "$out"; fail "$world $how: expected the hazard naming QP $qpn and the buffer $buf"; }
  done
done
for world in inproc fabric; do
  opts=(--clock lockstep --idle-us 0 --hosts 2)
  [ $world = fabric ] && opts=(--clock lockstep --fabric --hcas-per-host 2)
  "$hcasim" run "${opts[@]}" -- "$prog" own > "$tmp/own" 2>&1
  rc=$?
  grep -q "exit_in_flight: own handler" "$tmp/own" && [ $rc -eq 3 ] ||
    { cat "$tmp/own"; fail "$world own: the program's own SIGABRT handler did not run"; }
  echo "$world own: the program's handler ran"
done
echo PASS
