#!/bin/sh
# fabric_cost.sh BUILD_DIR [OPS]: what crossing processes costs. The same kind of workload —
# 64-byte RDMA WRITEs, few of them signaled (sim_throughput: 1 in 16; ib_write_bw: 1 in 100,
# its default) — measured side by side in one run:
#   in-process  : bench/sim_throughput (both QPs in one process, one world)
#   fabric      : ib_write_bw server and client as two processes on a private fabric
#                 (hcasim run -- A ::: B): every doorbell and every wait is a message to
#                 hcasim-device, every DMA a process_vm_readv/writev.
# Prints both rates in messages per wall-second and their ratio. Simulated-time figures are
# the same either way (one model); this is the simulator's own speed.
set -eu
build=$1; ops=${2:-20000}
port=18790
inproc=$("$build/bin/sim_throughput" --ops "$ops" | awk '/64 B, 1 in 16 signaled/ { print $(NF-1) }')
out=$("$build/bin/hcasim" run -- ib_write_bw -F -n "$ops" -s 64 -p $port \
      ::: "$(dirname "$0")/../tests/fabric/wait-port" $port ib_write_bw -F -n "$ops" -s 64 -p $port localhost 2>&1)
# perftest's row: bytes iterations BW-peak BW-average MsgRate[Mpps]; the client prints it last.
mpps=$(printf '%s\n' "$out" | awk '$1 == 64 && $2 == '"$ops"' { r = $NF } END { print r }')
fabric=$(awk -v m="$mpps" 'BEGIN { printf "%d", m * 1e6 }')
printf 'fabric cost: 64-byte RDMA WRITE, %s ops\n' "$ops"
printf '  %-44s %12s msgs/wall-s\n' "in-process world (sim_throughput)" "$inproc"
printf '  %-44s %12s msgs/wall-s\n' "two processes on a fabric (ib_write_bw)" "$fabric"
awk -v a="$fabric" -v b="$inproc" 'BEGIN { if (b > 0) printf "  ratio fabric/in-process: %.2f\n", a / b }'
