#!/bin/sh
# Runs gloo_allreduce as N processes (ranks 0..N-1) on one device, each with its own output,
# and passes only if every rank exits 0. Meant for a Soft-RoCE guest (tests/rxe/rxe-vm: rxe0,
# $RXE_WORKDIR writable), but works on any host with an RDMA device.
#   rxe_processes.sh GLOO_ALLREDUCE N [gloo_allreduce options...]
set -u
prog=$1; n=$2; shift 2
dir=${RXE_WORKDIR:-$(mktemp -d)}/gloo_allreduce.$$
dev=${RXE_DEV:-rxe0}
mkdir -p "$dir/store" || exit 1
pids=""
r=1
while [ "$r" -lt "$n" ]; do
  "$prog" --rank "$r" --size "$n" --device "$dev" --store "$dir/store" "$@" > "$dir/rank$r.out" 2>&1 &
  pids="$pids $!"
  r=$((r + 1))
done
"$prog" --rank 0 --size "$n" --device "$dev" --store "$dir/store" "$@"
rc=$?
for p in $pids; do
  wait "$p" || { st=$?; [ $rc -eq 0 ] && rc=$st; }
done
r=1
while [ "$r" -lt "$n" ]; do
  sed "s/^/[rank $r] /" "$dir/rank$r.out"
  r=$((r + 1))
done
echo "rxe_processes: $n ranks on $dev: exit status $rc"
exit $rc
