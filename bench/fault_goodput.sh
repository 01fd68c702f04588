#!/bin/sh
# fault_goodput.sh BUILD_DIR [MESSAGES] [QPS]: RC goodput against the loss rate. Runs
# tests/soak's fault_soak (a verified stream of SEND, SEND_IMM, WRITE, WRITE_IMM, READ, FETCH_ADD
# and CMP_SWP, 0 B .. 1 MiB, every byte and completion checked) under `hcasim run --clock
# lockstep --faults loss=P` for a range of P, the same seed and workload each time, plus one run
# with every fault together; prints one table row per run. Goodput is payload bytes checked per
# simulated second; "vs 0" is that against the loss-free run. Exit 1 if a run fails its checks.
set -u
build=$1; messages=${2:-2000}; qps=${3:-16}
printf '%-46s %9s %9s %8s %8s %9s %9s %11s %6s %7s\n' faults frames lost retrans NAKs dup_reqs sim_ms goodput_Gbs "vs 0" wall_s
base=
for spec in "" loss=0.0001 loss=0.001 loss=0.005 loss=0.01 loss=0.02 loss=0.05 \
            "loss=0.01,reorder=0.005,duplicate=0.001,corrupt=0.001"; do
  out=$("$build/bin/hcasim" run --clock lockstep --seed 5 --hosts 2 ${spec:+--faults "$spec"} -- \
        "$build/bin/fault_soak" --hosts 2 --qps "$qps" --messages "$messages" 2>&1)
  if ! printf '%s\n' "$out" | grep -q 'fault_soak: PASS'; then
    printf '%s\n' "$out" | grep -v hazard | tail -5
    echo "fault_goodput: the run with faults '$spec' failed"
    exit 1
  fi
  printf '%s\n' "$out" | awk -v spec="${spec:-none}" -v base="$base" '
    /^simulated:/ { sim = $2; gbs = $5 }
    /^counters:/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); c[kv[1]] = kv[2] } }
    /^wall:/ { wall = $2 }
    END {
      rel = base == "" ? 1 : gbs / base
      printf "%-46s %9d %9d %8d %8d %9d %9.3f %11.3f %6.3f %7.1f\n", spec, c["tx_packets"], c["injected_losses"],
             c["retransmits"], c["naks"], c["duplicates"], sim * 1000, gbs, rel, wall
    }'
  [ -n "$base" ] || base=$(printf '%s\n' "$out" | awk '/^simulated:/ { print $5 }')
done
