#!/usr/bin/env bash
# gloo_abort_rates.sh BUILD_DIR [N]: how often Debian's Gloo (0.5.0, unmodified) aborts at
# teardown, on the simulator and on Soft-RoCE side by side (docs/verbs.md, "Gloo at teardown").
#
# N launches (default 20) of the 4-rank gloo_algorithms job, fresh processes each time
# (tests/gloo/gloo_runs.sh), for two cases:
#   (a) AllreduceRing, --teardown checked   (check the result, then destroy: what applications do)
#   (b) AllreduceRing, --teardown immediate (destroy right after run(): Gloo's own race)
# in two worlds:
#   simulator  4 processes on one fabric (hcasim run ... ::: ...), --clock auto (realtime as
#              soon as the second process connects)
#   rxe        4 processes on rxe0 in one QEMU guest (tests/rxe/rxe-vm, TCG), the system
#              libibverbs
# and prints the abort rates in one table. Per-launch limit: 60 s on the simulator, 120 s in
# the guest (a launch over it counts as a hang). Set GLOO_RATES_WORLDS=sim or rxe for one world.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bench/gloo_abort_rates.sh BUILD_DIR [N]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
n=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
runs=$repo/tests/gloo/gloo_runs.sh
prog=$build/bin/gloo_algorithms
worlds=${GLOO_RATES_WORLDS:-sim rxe}
[ -x "$prog" ] || { echo "gloo_abort_rates: $prog not built (needs libgloo-dev)" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/gloo_rates.XXXXXX")
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

# The row of gloo_runs.sh's table for AllreduceRing: runs pass abort wrong hang messages.
row() { grep -m1 '^AllreduceRing ' "$1" 2> /dev/null | sed 's/^AllreduceRing *//'; }

for td in checked immediate; do
  case " $worlds " in *" sim "*)
    echo "gloo_abort_rates: simulator (fabric), $td teardown, $n launches" >&2
    "$runs" --launches "$n" --timeout 60 --teardown "$td" --hcasim "$build/bin/hcasim" \
      --workdir "$out/sim.$td" fabric "$prog" AllreduceRing > "$out/sim.$td.txt" 2>&1
    cat "$out/sim.$td.txt" >&2 ;;
  esac
done

case " $worlds " in *" rxe "*)
  sysdir=$(ldconfig -p | sed -n 's/.*libibverbs\.so\.1 .*=> \(.*\)\/libibverbs\.so\.1$/\1/p' | grep -v "$build" | head -1)
  [ -n "$sysdir" ] || sysdir=/usr/lib/x86_64-linux-gnu
  echo "gloo_abort_rates: rxe (QEMU guest), checked and immediate teardown, $n launches each" >&2
  mkdir -p "$out/rxe"
  # One guest for both cases; each gloo_runs.sh's output into its own file in the run dir.
  "$repo/tests/rxe/rxe-vm" --build-dir "$build" --workdir "$out/rxe" --timeout $((n * 2 * 130 + 60)) \
    -e LD_LIBRARY_PATH="$sysdir" -- bash -c '
      for td in checked immediate; do
        "$1" --launches "$3" --timeout 120 --teardown $td --workdir "$RXE_WORKDIR/runs.$td" \
          direct "$2" AllreduceRing > "$RXE_WORKDIR/rxe.$td.txt" 2>&1
        cat "$RXE_WORKDIR/rxe.$td.txt"
      done' _ "$runs" "$prog" "$n" >&2
  for td in checked immediate; do cp "$out/rxe/rxe.$td.txt" "$out/rxe.$td.txt" 2> /dev/null; done ;;
esac

# ---- the table ----------------------------------------------------------------------------
rate() {  # runs abort -> "a/r (p%)"
  [ -n "$1" ] && [ "$1" -gt 0 ] 2> /dev/null || { echo "not run"; return; }
  echo "$2/$1 ($((100 * $2 / $1))%)"
}
echo
echo "Gloo 0.5.0 at teardown: AllreduceRing, 4 ranks as 4 processes, $n launches per cell ($(date -u +%Y-%m-%d))"
printf '%-22s | %-34s | %-34s\n' "" "simulator (fabric, clock auto)" "rxe (rxe0, QEMU TCG guest)"
printf '%-22s | %-12s %-7s %-6s %-6s | %-12s %-7s %-6s %-6s\n' teardown aborts pass wrong hang aborts pass wrong hang
for td in checked immediate; do
  read -r sr sp sa sw sh _ <<< "$(row "$out/sim.$td.txt")"
  read -r rr rp ra rw rh _ <<< "$(row "$out/rxe.$td.txt")"
  printf '%-22s | %-12s %-7s %-6s %-6s | %-12s %-7s %-6s %-6s\n' "$td" "$(rate "${sr:-}" "${sa:-0}")" \
    "${sp:--}" "${sw:--}" "${sh:--}" "$(rate "${rr:-}" "${ra:-0}")" "${rp:--}" "${rw:--}" "${rh:--}"
done
echo
echo "abort messages (launches):"
for td in checked immediate; do
  for w in sim rxe; do
    m=$(row "$out/$w.$td.txt" | awk '{ $1=$2=$3=$4=$5=""; sub(/^ +/, ""); print }')
    printf '  %-9s %-4s %s\n' "$td" "$w" "${m:-(not run)}"
  done
done
echo "(outputs and the logs of launches that did not pass: $out)"
