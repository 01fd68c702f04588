#!/bin/sh
# rping_pcap_test.sh HCASIM SHIM DIR [ADDR]: an unmodified rping pair on the fabric with a pcap; tshark must
# dissect every frame cleanly and show the connection made by the CM (ConnectRequest,
# ConnectReply, ReadyToUse on QP1), then rping's RC traffic, then the disconnection
# (DisconnectRequest, DisconnectReply). Skips (77) without tshark or rping.
#
# Each run writes into its own new directory under DIR (mktemp -d), so two runs at once never
# read or remove each other's capture (as tests/cm/cm_wire_test.sh). The run's directory is
# removed when the run passes and kept, and named, when it fails.
set -eu
hcasim=$1; shim=$2; parent=$3; at=${4:-192.0.2.1}  # IPv4, or a host's IPv6 link-local address
case "$at" in *:*) proto=ipv6 ;; *) proto=ip ;; esac  # every frame, CM and data alike, over it
here=$(cd "$(dirname "$0")" && pwd)
command -v tshark >/dev/null 2>&1 || { echo "rping_pcap_test: tshark not installed"; exit 77; }
command -v rping >/dev/null 2>&1 || { echo "rping_pcap_test: rping not installed"; exit 77; }
. "$here/run-dir.sh"
run_dir rping_pcap_test "$parent"
pcap=$dir/rping.pcap
"$here/cm-pair" "$hcasim" "$shim" --pcap "$pcap" -- rping -s -a "$at" -V -C 20 \
  ::: rping -c -a "$at" -V -C 20 >"$dir/out" 2>&1 ||
  { cat "$dir/out"; echo "rping_pcap_test: rping failed" >&2; exit 1; }
rows=$(tshark -r "$pcap" --disable-heuristic rpcrdma_infiniband -T fields -E separator='|' \
  -e frame.protocols -e _ws.col.Info -e _ws.malformed -e _ws.expert 2>/dev/null)
bad=$(printf '%s\n' "$rows" | awk -F'|' '$1 !~ /eth:ethertype:'"$proto"':udp:infiniband/ || $3 != "" || $4 != ""')
[ -z "$bad" ] || { echo "rping_pcap_test: frames not cleanly dissected:"; echo "$bad"; exit 1; }
# One word per frame: the CM message, or RC for rping's own traffic.
seq=$(printf '%s\n' "$rows" | awk -F'|' '{ if (match($2, /CM: [A-Za-z]+/)) print substr($2, RSTART + 4, RLENGTH - 4);
  else if ($2 ~ /^RC /) print "RC" }' | uniq | tr '\n' ' ')
case "$seq" in
  *"ConnectRequest ConnectReply ReadyToUse RC DisconnectRequest DisconnectReply"*) ;;
  *) echo "rping_pcap_test: on the wire: $seq" >&2; exit 1 ;;
esac
echo "rping_pcap_test: $(printf '%s\n' "$rows" | wc -l) frames dissected cleanly: $seq"
