#!/bin/sh
# fabric_cost.sh BUILD_DIR [OPS]: what crossing processes costs, measured side by side in one run.
# The same stream of 64-byte RDMA WRITEs (write_stream: RC QPs on hcasim0 and hcasim1, 64 in
# flight, 1 in 16 signaled, ibv_poll_cq in a loop) in the realtime clock (the fabric's clock as
# soon as two processes share it):
#   in-process          hcasim run -- write_stream: the device in the program's process
#   fabric              hcasim run --fabric --hcas-per-host 2 -- write_stream: the device in
#                       hcasim-device; commands and waits are messages, DMA crosses processes
#   fabric, by address  the same with HCASIM_DMA_ARENA=0: the device reaches the driver's rings,
#                       tables and doorbell records with process_vm_readv/writev too
#   fabric, no read-ahead  the same with HCASIM_READ_AHEAD=0: one process_vm_readv per payload
#                       instead of one per batch of posts (sim/fabric/client_reads.h)
#   fabric, no watching  the same with HCASIM_POLL_SPIN=0: every empty poll waits in the device
#                       instead of first watching its progress page (docs/fabric.md, "Time")
# then the same stream between two processes (write_stream --pair: sender and receiver, each
# with its own HCA), which is what issue #17's fabric goal compares with the in-process stream,
# then two processes of ib_write_bw (server and client, its default 1 in 100 signaled, one
# doorbell per WRITE) as they run by default (doorbells through the arena's ring), with every
# doorbell a message (HCASIM_DOORBELL_RING=0) and without the shared arena, the same pair in the
# lockstep clock (with and without the ring, and with every payload ending a step:
# HCASIM_GATHER_ASLEEP=0) beside the in-process stream in that clock, and sim_throughput (both
# QPs driven by the harness itself).
# Prints messages per wall-second and the ratio to the in-process stream (its median of three runs). Simulated-time figures
# are the same everywhere (one model); this is the simulator's own speed.
set -eu
build=$1; ops=${2:-100000}
port=18790
here=$(dirname "$0")
rate_of() {  # write_stream's ops_per_wall_s=
  printf '%s\n' "$1" | tr ' ' '\n' | sed -n 's/^ops_per_wall_s=//p'
}
# Every ratio is to this row: the median of three runs, since one run now and then comes out a
# third slower on a shared machine.
inproc=$(for i in 1 2 3; do
  rate_of "$("$build/bin/hcasim" run --clock realtime -- "$build/bin/write_stream" --ops "$ops")"
done | sort -n | sed -n 2p)
fab=$(rate_of "$("$build/bin/hcasim" run --clock realtime --fabric --hcas-per-host 2 -- \
      "$build/bin/write_stream" --ops "$ops")")
fab0=$(rate_of "$(HCASIM_DMA_ARENA=0 "$build/bin/hcasim" run --clock realtime --fabric --hcas-per-host 2 -- \
      "$build/bin/write_stream" --ops "$ops")")
fabs=$(rate_of "$(HCASIM_POLL_SPIN=0 "$build/bin/hcasim" run --clock realtime --fabric --hcas-per-host 2 -- \
      "$build/bin/write_stream" --ops "$ops")")
fabra=$(rate_of "$(HCASIM_READ_AHEAD=0 "$build/bin/hcasim" run --clock realtime --fabric --hcas-per-host 2 -- \
      "$build/bin/write_stream" --ops "$ops")")
pairdir=$(mktemp -d)
pair=$(rate_of "$("$build/bin/hcasim" run -- "$build/bin/write_stream" --ops "$ops" --pair "$pairdir" --role receiver \
      ::: "$build/bin/write_stream" --ops "$ops" --pair "$pairdir" --role sender)")
rm -rf "$pairdir"
bw() {  # bw ARENA RING PORT [CLOCK [GATHER]]: ib_write_bw pair on a fabric, messages per wall-second
  out=$(HCASIM_DMA_ARENA=$1 HCASIM_DOORBELL_RING=$2 HCASIM_GATHER_ASLEEP=${5:-1} "$build/bin/hcasim" run --clock "${4:-auto}" -- \
        ib_write_bw -F -n "$ops" -s 64 -p "$3" \
        ::: "$here/../tests/fabric/wait-port" "$3" ib_write_bw -F -n "$ops" -s 64 -p "$3" localhost 2>&1)
  # perftest's row: bytes iterations BW-peak BW-average MsgRate[Mpps]; the client prints it last.
  mpps=$(printf '%s\n' "$out" | awk '$1 == 64 && $2 == '"$ops"' { r = $NF } END { print r }')
  awk -v m="$mpps" 'BEGIN { printf "%d", m * 1e6 }'
}
bw1=$(bw 1 1 $port)
bwr=$(bw 1 0 $((port + 1)))
bw0=$(bw 0 1 $((port + 2)))
bwl=$(bw 1 1 $((port + 3)) lockstep)
bwlr=$(bw 1 0 $((port + 4)) lockstep)
bwlg=$(bw 1 1 $((port + 5)) lockstep 0)
inlock=$(rate_of "$("$build/bin/hcasim" run --clock lockstep -- "$build/bin/write_stream" --ops "$ops")")
harness=$("$build/bin/sim_throughput" --ops "$ops" | awk '/64 B, 1 in 16 signaled/ { print $(NF-1) }')
printf 'fabric cost: 64-byte RDMA WRITE, %s ops, realtime clock unless a row says lockstep (load average %s)\n' "$ops" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
row() { awk -v n="$1" -v r="$2" -v b="$inproc" 'BEGIN { printf "  %-52s %9d msgs/wall-s  %5.2f\n", n, r, r / b }'; }
printf '  %-52s %20s  %5s\n' "" "" "ratio"
row "in-process (write_stream, median of 3)" "$inproc"
row "fabric, one process (write_stream)" "$fab"
row "fabric, one process, HCASIM_DMA_ARENA=0" "$fab0"
row "fabric, one process, HCASIM_READ_AHEAD=0" "$fabra"
row "fabric, one process, HCASIM_POLL_SPIN=0" "$fabs"
row "fabric, two processes (write_stream --pair)" "$pair"
row "fabric, two processes (ib_write_bw)" "$bw1"
row "fabric, two processes, HCASIM_DOORBELL_RING=0" "$bwr"
row "fabric, two processes, HCASIM_DMA_ARENA=0" "$bw0"
row "fabric, two processes (ib_write_bw), lockstep clock" "$bwl"
row "  the same, HCASIM_DOORBELL_RING=0" "$bwlr"
row "  the same, HCASIM_GATHER_ASLEEP=0" "$bwlg"
row "in-process (write_stream), lockstep clock" "$inlock"
row "in-process harness, lockstep (sim_throughput)" "$harness"
