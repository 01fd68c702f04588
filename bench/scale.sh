#!/bin/sh
# scale.sh BUILD_DIR [OPS_PER_QP [QPS]]: what more hosts cost. bench/scale_stream (1,024 RC QPs
# by default, all-to-all 64-byte RDMA WRITEs, 8 in flight per QP) in the in-process world with
# 2, 4, 8, 16, 32 and 64 simulated hosts on one switch, one run after the other, tracing off.
# Prints the wall cost per WRITE, WRITEs per wall second, the resident memory per host and per
# QP for each host count, and the cost at 64 hosts over the cost at 2 (issue #17 asks for at
# most 1.5). Figures, not pass/fail.
set -eu
build=$1; ops=${2:-200}; qps=${3:-1024}
hcasim=$build/bin/hcasim prog=$build/bin/scale_stream
[ -x "$hcasim" ] && [ -x "$prog" ] || { echo "scale.sh: build $build first (hcasim, scale_stream)" >&2; exit 2; }
printf 'scale: %s RC QPs, %s 64-byte WRITEs each, all-to-all over the hosts, in-process, lockstep (load %s)\n' \
  "$qps" "$ops" "$(cut -d' ' -f1 /proc/loadavg)"
printf '  %5s %8s %10s %12s %14s %12s %14s\n' hosts QPs WRITEs "us/WRITE" "WRITEs/wall-s" "KiB/host" "KiB/QP"
first="" last=""
for h in 2 4 8 16 32 64; do
  line=$("$hcasim" run --hosts "$h" -- "$prog" --qps "$qps" --ops "$ops") || { echo "scale.sh: $h hosts failed" >&2; exit 1; }
  # scale_stream: hosts H qps Q ops N ...: wall W s, C us per WRITE, R WRITEs per wall s; ...; rss per host A KiB, per QP B KiB
  set -- $(printf '%s\n' "$line" | sed -n 's/.*hosts \([0-9]*\) qps \([0-9]*\) ops \([0-9]*\).*s, \([0-9.]*\) us per WRITE, \([0-9]*\) WRITEs.*per host \([0-9.]*\) KiB, per QP \([0-9.]*\) KiB.*/\1 \2 \3 \4 \5 \6 \7/p')
  [ $# -eq 7 ] || { echo "scale.sh: unexpected output: $line" >&2; exit 1; }
  printf '  %5s %8s %10s %12s %14s %12s %14s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7"
  [ -n "$first" ] || first=$4
  last=$4
done
awk -v a="$last" -v b="$first" 'BEGIN { printf "  cost per WRITE at 64 hosts / at 2 hosts: %.2f\n", a / b }'
