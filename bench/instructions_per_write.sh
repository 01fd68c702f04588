#!/bin/sh
# instructions_per_write.sh BUILD_DIR [OPS]: CPU instructions the simulator spends per RDMA WRITE,
# counted by valgrind's callgrind (instructions, not seconds: the same figure however loaded the
# machine is). bench/write_stream (a plain ibverbs program: two RC QPs, 64 WRs in flight, 1 in 16
# signaled, ibv_poll_cq in a loop) runs under `hcasim run --clock lockstep`, the path users take,
# once with OPS and once with 2 x OPS WRITEs; the difference divided by OPS is the cost of one
# WRITE with set-up and teardown taken out. Prints it per size with the functions that take
# most of it, and the SystemC kernel's own cost per timed wake-up (sim_throughput's kernel-only
# loop under callgrind), so the distance to the kernel's ceiling shows.
set -eu
build=$1; ops=${2:-20000}
command -v valgrind >/dev/null 2>&1 || { echo "instructions_per_write: valgrind not installed (apt-get install valgrind)" >&2; exit 77; }
tmp=$(mktemp -d /tmp/ipw.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

# count OUT OPS SIZE: total instructions of one write_stream run (program and simulator).
count() {
  "$build/bin/hcasim" run --clock lockstep -- valgrind --tool=callgrind --callgrind-out-file="$1" \
    "$build/bin/write_stream" --ops "$2" --size "$3" >"$tmp/out" 2>&1 ||
    { cat "$tmp/out" >&2; echo "instructions_per_write: write_stream failed" >&2; exit 1; }
  sed -n 's/^summary: //p' "$1"
}

printf 'instructions per RDMA WRITE (callgrind; write_stream under hcasim run --clock lockstep, %s and %s WRITEs)\n' \
  "$ops" "$((ops * 2))"
printf '%8s %16s\n' size instructions
for size in 64 4096; do
  a=$(count "$tmp/a.$size" "$ops" "$size")
  b=$(count "$tmp/b.$size" "$((ops * 2))" "$size")
  printf '%8s %16s\n' "$size" "$(( (b - a) / ops ))"
done
echo
echo "where the 64 B WRITE's instructions go (top 12 functions of the longer run, share of its total):"
callgrind_annotate "$tmp/b.64" 2>/dev/null | sed -n '/file:function/,$p' | sed -n '3,14p' |
  sed -E 's/ \[[^]]*\]$//; s/\([^()]*\)$//' | cut -c1-150
echo
# The kernel's ceiling: instructions per timed method wake-up with no model at all.
valgrind --tool=callgrind --callgrind-out-file="$tmp/k" "$build/bin/sim_throughput" --kernel-only 200000 \
  >"$tmp/kout" 2>&1 || { cat "$tmp/kout" >&2; exit 1; }
k=$(sed -n 's/^summary: //p' "$tmp/k")
valgrind --tool=callgrind --callgrind-out-file="$tmp/k2" "$build/bin/sim_throughput" --kernel-only 400000 \
  >"$tmp/kout" 2>&1 || { cat "$tmp/kout" >&2; exit 1; }
k2=$(sed -n 's/^summary: //p' "$tmp/k2")
printf 'SystemC kernel alone: %s instructions per timed method wake-up\n' "$(( (k2 - k) / 200000 ))"
