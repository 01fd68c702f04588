#!/bin/sh
# cm_wire_test.sh IB_CM_TEST DIR: one connection's life on the wire. Runs the REQ/REP/RTU case of
# ib_cm_test with a pcap and a text trace (lockstep clock), then checks that tshark dissects the
# CM MADs as InfiniBand CM in the order the protocol sends them, around the RC SEND they set
# up, with no malformed frame and no expert warning, and that the trace shows each MAD as the
# GSI QP receives it and the state changes it drives. Skips (77) without tshark.
#
# Each run writes into its own new directory under DIR (mktemp -d), never into DIR itself: two
# runs at once (two ctest invocations on one build tree) once shared DIR/cm.pcap, and one
# removed and rewrote the capture while the other's tshark read it. The run's directory is
# removed when the run passes and kept, and named, when it fails.
set -eu
prog=$1; parent=$2
command -v tshark >/dev/null 2>&1 || { echo "cm_wire_test: tshark not installed"; exit 77; }
mkdir -p "$parent"
dir=$(mktemp -d "$parent/run.XXXXXX")
trap 's=$?; if [ $s -eq 0 ]; then rm -rf "$dir"; else echo "cm_wire_test: this run'"'"'s files are in $dir" >&2; fi' EXIT
pcap=$dir/cm.pcap trace=$dir/cm.trace
HCASIM_CLOCK=lockstep HCASIM_PCAP=$pcap HCASIM_TRACE=$trace "$prog" --gtest_filter='IbCm.ReqRep*' >"$dir/out" 2>&1 ||
  { cat "$dir/out"; echo "cm_wire_test: the test program failed" >&2; exit 1; }
rows=$(tshark -r "$pcap" --disable-heuristic rpcrdma_infiniband -T fields -E separator='|' \
  -e frame.protocols -e _ws.col.Info -e _ws.malformed -e _ws.expert 2>/dev/null)
bad=$(printf '%s\n' "$rows" | awk -F'|' '$1 !~ /eth:ethertype:ip(v6)?:udp:infiniband/ || $3 != "" || $4 != ""')
[ -z "$bad" ] || { echo "cm_wire_test: frames not cleanly dissected:"; echo "$bad"; exit 1; }
seq=$(printf '%s\n' "$rows" | awk -F'|' '{ if (match($2, /CM: [A-Za-z]+/)) print substr($2, RSTART + 4, RLENGTH - 4); else if ($2 ~ /RC Send Only/) print "RC-SEND" }' | tr '\n' ' ')
want="ConnectRequest ConnectReply ReadyToUse RC-SEND DisconnectRequest DisconnectReply "
[ "$seq" = "$want" ] || { echo "cm_wire_test: on the wire: '$seq', expected '$want'" >&2; exit 1; }
notes=$(grep -o 'GSI QP receives a MAD: CM [A-Z]*\|cm: comm 0x[0-9a-f]* [A-Z_]* -> [A-Z_]*' "$trace" |
  sed 's/cm: comm 0x[0-9a-f]* //; s/GSI QP receives a MAD: CM /rx /' | tr '\n' ',')
want_notes="IDLE -> LISTEN,IDLE -> REQ_SENT,rx REQ,IDLE -> REQ_RCVD,REQ_RCVD -> REP_SENT,rx REP,REQ_SENT -> REP_RCVD,REP_RCVD -> ESTABLISHED,rx RTU,REP_SENT -> ESTABLISHED,ESTABLISHED -> DREQ_SENT,rx DREQ,ESTABLISHED -> TIMEWAIT,rx DREP,DREQ_SENT -> TIMEWAIT,TIMEWAIT -> IDLE,TIMEWAIT -> IDLE,"
[ "$notes" = "$want_notes" ] || { echo "cm_wire_test: trace says '$notes'" >&2; echo "expected '$want_notes'" >&2; exit 1; }
echo "cm_wire_test: $seq- dissected cleanly; trace shows every MAD and state change"
