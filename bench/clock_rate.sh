#!/bin/sh
# clock_rate.sh BUILD_DIR [OPS] [RUNS]: how fast simulated time runs in each time model, side by side
# in one run. bench/write_stream (one process, one thread: RC QPs on hcasim0 and hcasim1, a
# stream of RDMA WRITEs, 64 in flight, 1 in 16 signaled, ibv_poll_cq in a loop) under
#   hcasim run --clock lockstep   simulated time moves only while the program waits in verbs
#   hcasim run --clock realtime   the device runs beside the program on the wall clock
# for 64 B and 4 KiB WRITEs (OPS each, default 100000). Prints one table: operations per wall
# second, simulated seconds per wall second as the program measures it (hcasim_sim_now_ns around
# the stream), and from the `clock:` line of --stats the engine's own rate (since the switch to
# realtime, set-up included) and the slip: simulated time given up because the model could not
# keep up with the wall clock; sys% is the share of the process's CPU time spent in the kernel
# (system calls, wake-ups: costs that callgrind's instruction counts do not show). Each row runs RUNS times (default 1); with more, it shows the run
# with the median rate and the lowest and highest rate beside it, since a shared or virtual
# machine's rate can swing by a fifth from one run to the next. Figures, not pass/fail (a
# failing run fails the script).
set -eu
build=$1; ops=${2:-100000}; runs=${3:-1}
case $runs in '' | *[!0-9]* | 0) echo "clock_rate: RUNS must be a positive integer, not '$runs'" >&2; exit 2 ;; esac
tmp=$(mktemp -d /tmp/clock-rate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The model's speed sets the realtime figures: name the build type (unset: unoptimised).
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
printf 'clock rate: RDMA WRITE stream, %s ops per row, one process, one thread (build type %s; load average %s)\n' \
  "$ops" "${btype:-none}" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%8s %-9s %12s %12s %14s %14s %12s %6s %s\n' size clock ops/wall-s wall-s "sim-s/wall-s" \
  "engine-rate" "slip(us)" "sys%" "$([ "$runs" -gt 1 ] && echo "  lowest..highest of $runs")"
# row SIZE CLOCK RUN: one run, as a table row (its rate first, for sorting), into $tmp/rows.
row() {
  if ! "$build/bin/hcasim" run --clock "$2" --stats="$tmp/stats" -- \
      "$build/bin/write_stream" --ops "$ops" --size "$1" > "$tmp/out" 2> "$tmp/err"; then
    echo "clock_rate: write_stream --size $1 under --clock $2 failed:" >&2
    cat "$tmp/out" "$tmp/err" >&2
    exit 1
  fi
  # write_stream: size=64 ops=N wall_s=W sim_s=S ops_per_wall_s=R sim_s_per_wall_s=Q
  line=$(grep '^write_stream:' "$tmp/out")
  get() { printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
  # clock: realtime: X simulated s in Y wall s (Z simulated s per wall s; W us of simulated
  # time given up where the model could not keep up) -- or "clock: lockstep (lockstep throughout)"
  clk=$(grep '^clock:' "$tmp/stats" || true)
  rate=$(printf '%s\n' "$clk" | sed -n 's/.*(\([0-9.]*\) simulated s per wall s.*/\1/p')
  slip=$(printf '%s\n' "$clk" | sed -n 's/.*; \([0-9.]*\) us of simulated time given up.*/\1/p')
  sys=$(awk -v u="$(get user_s)" -v k="$(get sys_s)" 'BEGIN { printf "%.1f", (u + k > 0) ? 100 * k / (u + k) : 0 }')
  printf '%s %8s %-9s %12s %12s %14s %14s %12s %6s\n' "$(get ops_per_wall_s)" "$1" "$2" \
    "$(get ops_per_wall_s)" "$(get wall_s)" "$(get sim_s_per_wall_s)" "${rate:--}" "${slip:--}" "$sys" >> "$tmp/rows"
}
for size in 64 4096; do
  for clock in lockstep realtime; do
    : > "$tmp/rows"
    i=0
    while [ "$i" -lt "$runs" ]; do row "$size" "$clock"; i=$((i + 1)); done
    sort -n "$tmp/rows" > "$tmp/sorted"
    median=$(sed -n "$(( (runs + 1) / 2 ))p" "$tmp/sorted" | cut -d' ' -f2-)
    range=""
    [ "$runs" -gt 1 ] && range="  $(head -n1 "$tmp/sorted" | cut -d' ' -f1)..$(tail -n1 "$tmp/sorted" | cut -d' ' -f1)"
    printf '%s%s\n' "$median" "$range"
  done
done
echo "sim-s/wall-s: the stream's simulated time over its wall time; engine-rate, slip(us): the"
echo "--stats clock line (realtime only; lockstep has no wall-clock mapping)"
