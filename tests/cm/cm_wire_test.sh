#!/bin/sh
# cm_wire_test.sh IB_CM_TEST DIR: one connection's life on the wire. Runs the REQ/REP/RTU case of
# ib_cm_test with a pcap and a text trace (lockstep clock), then checks that tshark dissects the
# CM MADs as InfiniBand CM in the order the protocol sends them, around the RC SEND they set
# up, with no malformed frame and no expert warning, and that the trace shows, host by host, each
# MAD as the GSI QP receives it and the state changes it drives, in causal order across the two
# hosts. Skips (77) without tshark.
#
# Each run writes into its own new directory under DIR (mktemp -d), never into DIR itself: two
# runs at once (two ctest invocations on one build tree) once shared DIR/cm.pcap, and one
# removed and rewrote the capture while the other's tshark read it. The run's directory is
# removed when the run passes and kept, and named, when it fails.
set -eu
prog=$1; parent=$2
command -v tshark >/dev/null 2>&1 || { echo "cm_wire_test: tshark not installed"; exit 77; }
. "$(dirname "$0")/run-dir.sh"
run_dir cm_wire_test "$parent"
pcap=$dir/cm.pcap trace=$dir/cm.trace
HCASIM_CLOCK=lockstep HCASIM_PCAP=$pcap HCASIM_TRACE=$trace "$prog" --gtest_filter='IbCm.ReqRep*' >"$dir/out" 2>&1 ||
  { cat "$dir/out"; echo "cm_wire_test: the test program failed" >&2; exit 1; }
rows=$(tshark -r "$pcap" --disable-heuristic rpcrdma_infiniband -T fields -E separator='|' \
  -e frame.protocols -e _ws.col.Info -e _ws.malformed -e _ws.expert 2>"$dir/tshark.err") ||
  { cat "$dir/tshark.err" >&2; echo "cm_wire_test: tshark cannot read $pcap" >&2; exit 1; }
bad=$(printf '%s\n' "$rows" | awk -F'|' '$1 !~ /eth:ethertype:ip(v6)?:udp:infiniband/ || $3 != "" || $4 != ""')
[ -z "$bad" ] || { echo "cm_wire_test: frames not cleanly dissected:"; echo "$bad"; exit 1; }
seq=$(printf '%s\n' "$rows" | awk -F'|' '{ if (match($2, /CM: [A-Za-z]+/)) print substr($2, RSTART + 4, RLENGTH - 4); else if ($2 ~ /RC Send Only/) print "RC-SEND" }' | tr '\n' ' ')
want="ConnectRequest ConnectReply ReadyToUse RC-SEND DisconnectRequest DisconnectReply "
[ "$seq" = "$want" ] || { echo "cm_wire_test: on the wire: '$seq', expected '$want'" >&2; exit 1; }
# The trace's CM notes, one per line: line number|host|what ("rx DREQ", "ESTABLISHED -> TIMEWAIT").
notes=$(awk '
  /GSI QP receives a MAD: CM [A-Z]+/ {
    match($0, /GSI QP receives a MAD: CM [A-Z]+/); print NR "|" $2 "|rx " substr($0, RSTART + 26, RLENGTH - 26); next }
  /cm: comm 0x[0-9a-f]+ [A-Z_]+ -> [A-Z_]+/ {
    match($0, /cm: comm 0x[0-9a-f]+ [A-Z_]+ -> [A-Z_]+/); n = substr($0, RSTART, RLENGTH)
    sub(/^cm: comm 0x[0-9a-f]+ /, "", n); print NR "|" $2 "|" n }' "$trace")
# Each host's own notes in order: every MAD it receives, then the state change that MAD drives
# (hcasim0 is the active side, hcasim1 the listener).
host_notes() { printf '%s\n' "$notes" | awk -F'|' -v h="$1" '$2 == h { printf "%s,", $3 }'; }
want0="IDLE -> REQ_SENT,rx REP,REQ_SENT -> REP_RCVD,REP_RCVD -> ESTABLISHED,ESTABLISHED -> DREQ_SENT,rx DREP,DREQ_SENT -> TIMEWAIT,TIMEWAIT -> IDLE,"
want1="IDLE -> LISTEN,rx REQ,IDLE -> REQ_RCVD,REQ_RCVD -> REP_SENT,rx RTU,REP_SENT -> ESTABLISHED,rx DREQ,ESTABLISHED -> TIMEWAIT,TIMEWAIT -> IDLE,"
check_host() {  # check_host HOST WANT
  got=$(host_notes "$1")
  [ "$got" = "$2" ] || { echo "cm_wire_test: $1's trace says '$got'" >&2; echo "expected '$2'" >&2; exit 1; }
}
check_host hcasim0 "$want0"
check_host hcasim1 "$want1"
# Between the hosts, only what causality orders: a sender notes its new state before it posts
# the MAD (driver/cm/ib_cm.cpp send_req, send_rep, send_rtu, send_dreq: set_state, then
# transmit), so that note comes before the peer receives the MAD; the DREP is sent only once the
# DREQ has arrived. The listener's ESTABLISHED -> TIMEWAIT is not ordered against the DREP's
# arrival: the CM answers a DREQ with the DREP first and notes its time wait after
# (ib_cm_recv.cpp on_dreq), and in lockstep the clock moves on while another thread waits in
# verbs, so a CM thread slow to get there (seen under ASan) notes it after the DREP's arrival.
line_of() { printf '%s\n' "$notes" | awk -F'|' -v h="$1" -v n="$2" '$2 == h && $3 == n { print $1; exit }'; }
before() {  # before HOST NOTE HOST NOTE
  a=$(line_of "$1" "$2") b=$(line_of "$3" "$4")
  [ "$a" -lt "$b" ] || { echo "cm_wire_test: $1 '$2' (trace line $a) is not before $3 '$4' (line $b)" >&2; exit 1; }
}
before hcasim0 "IDLE -> REQ_SENT" hcasim1 "rx REQ"
before hcasim1 "REQ_RCVD -> REP_SENT" hcasim0 "rx REP"
before hcasim0 "REP_RCVD -> ESTABLISHED" hcasim1 "rx RTU"
before hcasim0 "ESTABLISHED -> DREQ_SENT" hcasim1 "rx DREQ"
before hcasim1 "rx DREQ" hcasim0 "rx DREP"
echo "cm_wire_test: $seq- dissected cleanly; trace shows every MAD and state change"
