#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CLI-level end-to-end checks: unmodified programs under `hcasim run`.
#
#   cli_test.sh three_ops   HCASIM THREE_OPS   lab 1 passes under the simulator
#   cli_test.sh devices     HCASIM             ibv_devices lists hcasim0 and hcasim1
#   cli_test.sh devinfo     HCASIM             ibv_devinfo (-v): port, link layer, GIDs
#   cli_test.sh trace       HCASIM THREE_OPS   the step trace shows the whole WRITE_WITH_IMM path, in order
#   cli_test.sh determinism HCASIM THREE_OPS   two runs give byte-identical traces
#   cli_test.sh profiles    HCASIM             `hcasim profiles` describes every profile; --profile checks
#   cli_test.sh filters     HCASIM THREE_OPS   --trace-filter: host names, packets by QPN, short
#                                              kind words; bad filters refused before the program runs
#   cli_test.sh explain     HCASIM THREE_OPS   errors are explained on stderr by default; --no-explain silences
#   cli_test.sh drop        HCASIM THREE_OPS   --drop loses the named frame and RC recovers (NAK, go-back);
#                                              step mode's drop next; bad rules refused before the program runs
#   cli_test.sh options     HCASIM             every other bad `hcasim run` option, missing or conflicting
#                                              ones: exit 2, a message naming the option, nothing run
#   cli_test.sh env         HCASIM THREE_OPS   bad HCASIM_* variables: the world refuses them by name and
#                                              the program sees no devices
#   cli_test.sh faults      HCASIM THREE_OPS   --faults: bad specs refused before the program runs; the same
#                                              seed gives byte-identical traces, another seed other faults;
#                                              faults in the trace (kind fault) and in --stats;
#                                              with --pcap, FILE.faults lists them by frame number
#   cli_test.sh link_down   HCASIM THREE_OPS   --faults link-down=HOST@T1..T2: bad clauses refused by name
#                                              before the program runs; three_ops passes across an outage,
#                                              identical traces twice, link faults in the trace and --stats;
#                                              ibv_devinfo shows PORT_DOWN while the link is down
#
# Exit 0 pass, 1 fail, 77 skip (ctest SKIP_RETURN_CODE).
set -u

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }

mode=${1:?mode}
hcasim=${2:?path to hcasim}
[ -x "$hcasim" ] || fail "no hcasim at $hcasim"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcasim-cli.XXXXXX") || fail "mktemp"
keep=0
cleanup() { [ "$keep" = 1 ] && echo "files kept in $tmp" >&2 || rm -rf "$tmp"; }
trap cleanup EXIT

# run OUT args...: run hcasim with a time limit; stdout+stderr to OUT; returns the exit status.
# E2E_PRELOAD (sanitizer builds): a runtime the programs under test must load first.
run() {
  local out=$1; shift
  if [ -n "${E2E_PRELOAD:-}" ]; then
    timeout 60 env LD_PRELOAD="$E2E_PRELOAD" "$hcasim" "$@" >"$out" 2>&1
  else
    timeout 60 "$hcasim" "$@" >"$out" 2>&1
  fi
}

need_tool() {
  command -v "$1" >/dev/null 2>&1 || skip "$1 not installed (Debian package ibverbs-utils)"
}

case "$mode" in
profiles)
  run "$tmp/out" profiles || fail "hcasim profiles exited $?"
  cat "$tmp/out"
  for p in roce-100g roce-25g teaching; do
    grep -q "^$p: " "$tmp/out" || fail "profile $p is not described"
  done
  [ "$(grep -c '^  link [0-9]* Gb/s' "$tmp/out")" = 3 ] || fail "not every profile gives its link rate"
  grep -q "^  link 1 Gb/s, port to port 1.0 us (cable and PHYs), path MTU 1024$" "$tmp/out" || fail "teaching profile figures"
  run "$tmp/out" run --profile nope -- sh -c "touch $tmp/ran"
  [ $? -eq 2 ] || fail "--profile nope did not exit 2"
  grep -q "unknown profile 'nope' (known: roce-100g roce-25g teaching" "$tmp/out" || fail "--profile message: $(cat "$tmp/out")"
  [ ! -e "$tmp/ran" ] || fail "the program ran despite the bad profile"
  ;;

filters)
  prog=${3:?three_ops}
  # A bad filter is refused with the option named, before anything runs (the marker stays absent).
  for spec in 'host=5' 'host=hcasim7' 'kind=bogus' 'unit=nope' 'qpn=zz' 'qpn=0x1000000' 'hots=1' 'kind='; do
    run "$tmp/out" run --trace "$tmp/t" --trace-filter "$spec" -- sh -c "touch $tmp/ran"
    rc=$?
    [ $rc -eq 2 ] || fail "--trace-filter '$spec' exited $rc, expected 2: $(cat "$tmp/out")"
    grep -q "^hcasim: --trace-filter: " "$tmp/out" || fail "'$spec': message does not name the option: $(cat "$tmp/out")"
    [ ! -e "$tmp/ran" ] || fail "'$spec': the program ran despite the bad filter"
  done
  grep -q "kinds: post, doorbell" < <(run "$tmp/out" run --trace-filter kind=bogus -- true; cat "$tmp/out") ||
    fail "an unknown kind does not list the valid ones"
  run "$tmp/out" run --step-filter host=9 -- true
  grep -q "^hcasim: --step-filter: no host '9'" "$tmp/out" || fail "--step-filter not checked: $(cat "$tmp/out")"
  # host= takes a name: only hcasim1's events.
  run "$tmp/out" run --trace "$tmp/t" --trace-filter host=hcasim1 -- "$prog" || fail "host=hcasim1 run failed"
  [ "$(awk '!/^#/ {print $2}' "$tmp/t" | sort -u)" = hcasim1 ] || fail "host=hcasim1 kept other hosts"
  # qpn= also matches packets by the destination QP in their BTH.
  run "$tmp/out" run --trace "$tmp/t" --trace-filter 'qpn=0x11;unit=port' -- "$prog" || fail "qpn run failed"
  grep -Eq "port +pkt.tx" "$tmp/t" || fail "qpn=0x11 kept no packets"
  # The short words of step mode work in filters too: cqe = cqe.write.
  run "$tmp/out" run --trace "$tmp/t" --trace-filter kind=cqe -- "$prog" || fail "kind=cqe run failed"
  [ "$(awk '!/^#/ {print $4}' "$tmp/t" | sort -u)" = cqe.write ] || fail "kind=cqe kept other kinds"
  ;;

explain)
  prog=${3:?three_ops}
  # hcasim1 loses every copy of PSN 1000: the SEND's retries run out (IBV_WC_RETRY_EXC_ERR).
  run "$tmp/out" run --drop 'host=1;psn=1000;count=100' -- "$prog"
  [ $? -eq 1 ] || fail "three_ops should fail when the wire loses everything: $(cat "$tmp/out")"
  grep -q "^hcasim: hcasim0 CQ unit, QP 0x000011: send WQE 0 completed with IBV_WC_RETRY_EXC_ERR: no acknowledgement" \
    "$tmp/out" || fail "the retry error is not explained: $(cat "$tmp/out")"
  grep -q "^hcasim: hcasim0 firmware, QP 0x000011: QP 0x11 -> ERR (transport retries exhausted)" "$tmp/out" ||
    fail "the move to ERR is not explained"
  run "$tmp/out" run --no-explain --drop 'host=1;psn=1000;count=100' -- "$prog"
  ! grep -q "^hcasim: " "$tmp/out" || fail "--no-explain still explains: $(cat "$tmp/out")"
  grep -q "three_ops: FAILED: SEND (sender): completion status transport retry counter exceeded" "$tmp/out" ||
    fail "the program's own message is missing"
  # A clean run explains nothing.
  run "$tmp/out" run -- "$prog" || fail "three_ops failed"
  ! grep -q "^hcasim: " "$tmp/out" || fail "a clean run printed: $(cat "$tmp/out")"
  ;;

drop)
  prog=${3:?three_ops}
  for rule in 'psn=3' 'host=2' 'host=hcasim9;psn=1' 'host=1;psn=0x1000000' 'host=1;count=0' 'host=1;pns=4' 'host=1;qpn'; do
    run "$tmp/out" run --drop "$rule" -- sh -c "touch $tmp/ran"
    rc=$?
    [ $rc -eq 2 ] || fail "--drop '$rule' exited $rc, expected 2: $(cat "$tmp/out")"
    grep -q "^hcasim: --drop: " "$tmp/out" || fail "'$rule': message does not name the option: $(cat "$tmp/out")"
    [ ! -e "$tmp/ran" ] || fail "'$rule': the program ran despite the bad rule"
  done
  # hcasim1 loses the SEND's middle packet (PSN 1001): a sequence NAK, go-back to 1001, success.
  run "$tmp/out" run --clock lockstep --drop 'host=hcasim1;psn=1001' --stats --trace "$tmp/t" -- "$prog" ||
    fail "three_ops failed with a lost frame: $(cat "$tmp/out")"
  grep -q "hcasim1  port      error       0x010011  frame lost (injected: psn=1001)" "$tmp/t" || fail "no loss in the trace"
  grep -q "resp      nak         0x010011  PSN gap: got 1002 expected 1001" "$tmp/t" || fail "no sequence NAK"
  grep -q "req       retransmit  0x000011  go back to PSN 1001" "$tmp/t" || fail "no go-back-N"
  [ "$(grep -c 'frame lost' "$tmp/t")" = 1 ] || fail "more than one frame lost"
  grep -q "^all checks passed$" "$tmp/out" || fail "three_ops did not pass"
  # The same loss as a --faults clause: the same trace but for its header (which names the option).
  run "$tmp/out" run --clock lockstep --faults 'drop=psn:1001@host=hcasim1' --trace "$tmp/t2" -- "$prog" ||
    fail "three_ops failed with drop=psn:1001@host=hcasim1: $(cat "$tmp/out")"
  grep -q "^all checks passed$" "$tmp/out" || fail "three_ops did not pass under the drop= clause"
  diff <(grep -v '^#' "$tmp/t") <(grep -v '^#' "$tmp/t2") >"$tmp/d" ||
    fail "--faults drop= and --drop traced differently: $(head -20 "$tmp/d")"
  # With --pcap, the scripted loss is in FILE.faults, naming the captured frame (PSN 1001).
  run "$tmp/out" run --clock lockstep --drop 'host=hcasim1;psn=1001' --pcap "$tmp/d.pcap" -- "$prog" ||
    fail "three_ops failed with --drop and --pcap: $(cat "$tmp/out")"
  line=$(grep -v '^#' "$tmp/d.pcap.faults" 2>/dev/null)
  [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || fail "want one line in d.pcap.faults, got: $line"
  printf '%s\n' "$line" | grep -qP '^[1-9]\d*\t[^\t]+\thcasim0\tlost at hcasim1 \(scripted drop\)\t.*psn=1001 ' ||
    fail "d.pcap.faults does not name the dropped frame: $line"
  if command -v tshark >/dev/null; then
    n=$(printf '%s\n' "$line" | cut -f1)
    psn=$(tshark -r "$tmp/d.pcap" -Y "frame.number == $n" -T fields -e infiniband.bth.psn 2>/dev/null)
    [ "$psn" = 1001 ] || fail "frame $n of the capture has PSN '$psn', want 1001"
  fi
  # Step mode: drop next at the first packet start loses PSN 1000 at hcasim1.
  printf 'n pkt.tx\ndrop next\nq\n' >"$tmp/cmds"
  run "$tmp/out" run --step-script "$tmp/cmds" --trace "$tmp/t" -- "$prog" || fail "step run failed: $(cat "$tmp/out")"
  grep -q "step: the next frame any host receives will be lost" "$tmp/out" || fail "drop next not acknowledged"
  grep -q "hcasim1  port      error       0x010011  frame lost (injected: psn=1000)" "$tmp/t" || fail "drop next lost nothing"
  ;;

options)
  # refused MESSAGE ARGS...: `hcasim ARGS...` exits 2 with MESSAGE (a fixed string) as a line of
  # its output, and the command after -- (which would leave a marker) never runs.
  refused() {
    local msg=$1; shift
    rm -f "$tmp/ran"
    run "$tmp/out" "$@"
    rc=$?
    [ $rc -eq 2 ] || fail "'$*' exited $rc, expected 2: $(cat "$tmp/out")"
    grep -qxF -- "$msg" "$tmp/out" || fail "'$*': expected the line '$msg', got: $(cat "$tmp/out")"
    [ ! -e "$tmp/ran" ] || fail "'$*': the program ran"
    echo "ok: $*"
  }
  mark="touch $tmp/ran"
  refused "hcasim: --hosts: expected a number from 1 to 64, got '0'" run --hosts 0 -- sh -c "$mark"
  refused "hcasim: --hosts: expected a number from 1 to 64, got '65'" run --hosts 65 -- sh -c "$mark"
  refused "hcasim: --hosts: expected a number from 1 to 64, got 'two'" run --hosts two -- sh -c "$mark"
  refused "hcasim: --clock: expected auto, lockstep or realtime, got 'fast' (docs/architecture.md#time)" \
    run --clock fast -- sh -c "$mark"
  refused "hcasim: --seed: expected a number, got 'x'" run --seed x -- sh -c "$mark"
  refused "hcasim: --seed: expected a number, got '-1'" run --seed -1 -- sh -c "$mark"
  refused "hcasim: --idle-us: expected 0..10000000, got '-0'" run --idle-us -0 -- sh -c "$mark"
  refused "hcasim: --idle-us: expected 0..10000000, got '10000001'" run --idle-us 10000001 -- sh -c "$mark"
  refused "hcasim: --grace: expected seconds (0..86400), got 'soon'" run --grace soon -- sh -c "$mark"
  refused "hcasim: --trace needs FILE or -" run --trace -- sh -c "$mark"
  refused "hcasim: --pcap needs a FILE" run --pcap -- sh -c "$mark"
  refused "hcasim: --stats=: expected a FILE or json" run --stats= -- sh -c "$mark"
  refused "hcasim: run: unknown option '--trace-filer' (see hcasim help)" run --trace-filer kind=pkt -- sh -c "$mark"
  refused "hcasim: run: no COMMAND given (hcasim run [options] -- COMMAND [ARGS...])" run --stats --
  refused "hcasim: run: no COMMAND given (hcasim run [options] -- COMMAND [ARGS...])" run
  refused "hcasim: run: empty command before ':::'" run -- ::: sh -c "$mark"
  refused "hcasim: --clock realtime cannot be combined with step mode: a paused device would fall behind the wall clock (use --clock lockstep or auto)" \
    run --step --clock realtime -- sh -c "$mark"
  refused "hcasim: --step-script: cannot read $tmp/none: No such file or directory" \
    run --step-script "$tmp/none" -- sh -c "$mark"
  refused "hcasim: unknown command 'rnu' (hcasim run | fabric | profiles | version | help)" rnu -- sh -c "$mark"
  # A program that does not exist: hcasim says so and exits 127, as a shell would.
  run "$tmp/out" run -- "$tmp/no-such-program"
  rc=$?
  [ $rc -eq 127 ] || fail "a missing program exited $rc, expected 127: $(cat "$tmp/out")"
  grep -qxF "hcasim: cannot run '$tmp/no-such-program': No such file or directory" "$tmp/out" ||
    fail "a missing program is not named: $(cat "$tmp/out")"
  ;;

env)
  prog=${3:?three_ops}
  # bad_env MESSAGE VAR=VALUE: the world refuses the variable by name before any device exists;
  # the program finds no devices and fails (three_ops exits 1).
  bad_env() {
    local msg=$1 assignment=$2
    (export "${assignment?}" && run "$tmp/out" run -- "$prog")
    rc=$?
    [ $rc -ne 0 ] || fail "$assignment: three_ops passed: $(cat "$tmp/out")"
    grep -qxF -- "$msg" "$tmp/out" || fail "$assignment: expected the line '$msg', got: $(cat "$tmp/out")"
    ! grep -q "^all checks passed" "$tmp/out" || fail "$assignment: the program found devices"
    echo "ok: $assignment"
  }
  bad_env "hcasim: HCASIM_HOSTS=0: expected a number from 1 to 64" HCASIM_HOSTS=0
  bad_env "hcasim: HCASIM_HOSTS=x: expected a number from 1 to 64" HCASIM_HOSTS=x
  bad_env "hcasim: HCASIM_CLOCK=fast: expected auto, lockstep or realtime" HCASIM_CLOCK=fast
  bad_env "hcasim: HCASIM_PROFILE=roce-400g: unknown profile (known: roce-100g roce-25g teaching)" \
    HCASIM_PROFILE=roce-400g
  bad_env "hcasim: HCASIM_SEED=seven: expected a number from 0 to 18446744073709551615" HCASIM_SEED=seven
  bad_env "hcasim: HCASIM_SEED=-1: expected a number from 0 to 18446744073709551615" HCASIM_SEED=-1
  bad_env "hcasim: HCASIM_IDLE_US=-5: expected a number from 0 to 10000000" HCASIM_IDLE_US=-5
  bad_env "hcasim: HCASIM_EXPLAIN=yes: expected a number from 0 to 1" HCASIM_EXPLAIN=yes
  bad_env "hcasim: --trace-filter (HCASIM_TRACE_FILTER): no host 'hcasim5' in this run (hcasim0..hcasim1, or 0..1)" \
    HCASIM_TRACE_FILTER=host=hcasim5
  bad_env "hcasim: --drop (HCASIM_DROP): 'psn=3' names no host (host=NAME or host=INDEX: the host that loses the frame)" \
    HCASIM_DROP=psn=3
  ;;

faults)
  prog=${3:?three_ops}
  for spec in 'loss' 'loss=2' 'drop=0.1' 'delay=5' 'loss=0.1@host=7' 'loss=0.1@dir=tx' 'loss=0.1,,reorder=0.1' \
              'corrupt=0.1@op=cas'; do
    run "$tmp/out" run --faults "$spec" -- sh -c "touch $tmp/ran"
    rc=$?
    [ $rc -eq 2 ] || fail "--faults '$spec' exited $rc, expected 2: $(cat "$tmp/out")"
    grep -q "^hcasim: --faults: clause '" "$tmp/out" || grep -q "^hcasim: --faults: empty clause" "$tmp/out" ||
      fail "'$spec': message does not name the option and clause: $(cat "$tmp/out")"
    [ ! -e "$tmp/ran" ] || fail "'$spec': the program ran despite the bad spec"
  done
  run "$tmp/out" run --faults 'loss=0.1@host=7' -- true
  grep -q "bad host '7' (hcasim0..hcasim1, or 0..1)" "$tmp/out" || fail "a bad host does not list the run's hosts"
  # The library checks HCASIM_FAULTS itself when the program is started without hcasim run.
  HCASIM_FAULTS='loss=x' run "$tmp/out" run -- "$prog"
  grep -q "hcasim: --faults (HCASIM_FAULTS): clause 'loss=x': bad probability" "$tmp/out" ||
    fail "a bad HCASIM_FAULTS is not named: $(cat "$tmp/out")"
  spec='loss=0.1,duplicate=0.1,reorder=0.1,corrupt=0.1,delay=3us@op=ack'
  n=0
  for s in 7 7 8; do
    n=$((n + 1))
    run "$tmp/out.$n" run --clock lockstep --idle-us 0 --seed $s --faults "$spec" --stats --trace "$tmp/t.$n" -- "$prog" ||
      { keep=1; fail "three_ops failed under --faults (seed $s): $(cat "$tmp/out.$n")"; }
    grep -q "^all checks passed$" "$tmp/out.$n" || fail "three_ops did not pass under faults (seed $s)"
  done
  head -1 "$tmp/t.1" | grep -q "; seed 7; faults $spec$" || fail "the trace's first line does not name the faults"
  cmp -s "$tmp/t.1" "$tmp/t.2" || { keep=1; diff "$tmp/t.1" "$tmp/t.2" | head >&2; fail "same seed, different traces"; }
  grep ' fault: ' "$tmp/t.1" >"$tmp/f.1"
  grep ' fault: ' "$tmp/t.3" >"$tmp/f.3"
  [ -s "$tmp/f.1" ] && [ -s "$tmp/f.3" ] || fail "no fault in the trace"
  cmp -s "$tmp/f.1" "$tmp/f.3" && fail "seeds 7 and 8 gave the same faults"
  echo "seed 7: $(wc -l <"$tmp/f.1") faults, identical traces twice; seed 8: $(wc -l <"$tmp/f.3") faults"
  for w in lost duplicated 'held back' corrupted delayed; do
    grep -q "fault: $w" "$tmp/t.1" "$tmp/t.3" || fail "no '$w' fault in either trace"
  done
  grep -Eq '^  injected_losses +[1-9]' "$tmp/out.1" || fail "--stats does not count the losses: $(cat "$tmp/out.1")"
  grep -Eq '^  icrc_errors +[1-9]' "$tmp/out.1" "$tmp/out.3" || fail "no ICRC error counted"
  # The capture's side file: the same faults as the trace, each naming its frame in the capture.
  run "$tmp/out.p" run --clock lockstep --idle-us 0 --seed 7 --faults "$spec" --pcap "$tmp/c.pcap" -- "$prog" ||
    fail "three_ops failed under --faults with --pcap: $(cat "$tmp/out.p")"
  [ -s "$tmp/c.pcap.faults" ] || fail "no $tmp/c.pcap.faults beside the capture"
  sed 's/.* fault: //' "$tmp/f.1" >"$tmp/want"
  grep -v '^#' "$tmp/c.pcap.faults" | cut -f4,5 | sed 's/\t/: /' >"$tmp/got"
  cmp -s "$tmp/want" "$tmp/got" || { diff "$tmp/want" "$tmp/got" | head >&2; fail "the .faults file and the trace disagree"; }
  awk -F'\t' '!/^#/ && $1 < 1 { bad = 1 } END { exit bad }' "$tmp/c.pcap.faults" ||
    fail "a fault names no frame of the capture: $(cat "$tmp/c.pcap.faults")"
  if command -v tshark >/dev/null; then
    # The first lost frame, looked up in the capture by its number, is the frame the line describes.
    line=$(grep -P '^\d+\t[^\t]*\t[^\t]*\tlost\t' "$tmp/c.pcap.faults" | head -1)
    no=$(printf '%s' "$line" | cut -f1)
    psn=$(printf '%s' "$line" | sed -n 's/.* psn=\([0-9]*\).*/\1/p')
    got=$(tshark -r "$tmp/c.pcap" -Y "frame.number == $no" -T fields -e infiniband.bth.psn 2>/dev/null)
    [ "$got" = "$psn" ] || fail "frame $no of the capture has PSN '$got', the .faults line says $psn: $line"
  fi
  echo "the capture's .faults file: $(grep -vc '^#' "$tmp/c.pcap.faults") faults, as in the trace, frames named"
  ;;

link_down)
  prog=${3:?three_ops}
  # Each bad clause: exit 2 before the program runs, and the message that names what is wrong.
  while IFS='|' read -r spec says; do
    run "$tmp/out" run --faults "$spec" -- sh -c "touch $tmp/ran"
    rc=$?
    [ $rc -eq 2 ] || fail "--faults '$spec' exited $rc, expected 2: $(cat "$tmp/out")"
    grep -qF "hcasim: --faults: clause '$spec': $says" "$tmp/out" ||
      fail "'$spec': expected \"$says\": $(cat "$tmp/out")"
    [ ! -e "$tmp/ran" ] || fail "'$spec': the program ran despite the bad spec"
  done <<'SPECS'
link-down=hcasim1|missing times (link-down=HOST@T1..T2: down from T1 to T2; HOST@T1: down from T1 on)
link-down=hcasim5@10us..20us|bad host 'hcasim5' (hcasim0..hcasim1, or 0..1)
link-down=1@10|bad down time '10' (a simulated time from the start of the run with its unit, ns, us, ms or s, up to an hour: 10us)
link-down=1@10us..x|bad up time 'x'
link-down=1@200us..10us|the link must come back after it goes down (T2 10us is not later than T1 200us)
SPECS
  run "$tmp/out" run --faults 'link-down=1@10us..50us,link-down=hcasim1@40us' -- true
  grep -qF "clause 'link-down=hcasim1@40us': overlaps an earlier link-down of the same host" "$tmp/out" ||
    fail "overlapping windows: $(cat "$tmp/out")"
  # three_ops's WRITE leaves at about 5.7 us: the link is down from 5 us to 100 us, so it is lost
  # and sent again after the local ACK timeout. Everything passes, twice with identical traces.
  spec='link-down=hcasim1@5us..100us'
  for n in 1 2; do
    run "$tmp/out.$n" run --clock lockstep --idle-us 0 --faults "$spec" --stats --trace "$tmp/t.$n" -- "$prog" ||
      { keep=1; fail "three_ops failed across a link-down: $(cat "$tmp/out.$n")"; }
    grep -q "^all checks passed$" "$tmp/out.$n" || fail "three_ops did not pass across the link-down"
  done
  cmp -s "$tmp/t.1" "$tmp/t.2" || { keep=1; diff "$tmp/t.1" "$tmp/t.2" | head >&2; fail "same spec, different traces"; }
  for w in "fault: link down: hcasim1's port loses every frame until 100.000 us" \
           'fault: lost (link down: hcasim' "fault: link up: hcasim1's port carries frames again" \
           'port 1: link down, port state DOWN: port-change EQE'; do
    grep -qF "$w" "$tmp/t.1" || { keep=1; fail "no '$w' in the trace"; }
  done
  grep -qF 'asynchronous event IBV_EVENT_PORT_ERR: port 1' "$tmp/out.1" || fail "PORT_ERR is not explained"
  grep -Eq '^  link_down_losses +[1-9]' "$tmp/out.1" || fail "--stats does not count the lost frames"
  grep -Eq '^  link_changes +2$' "$tmp/out.1" || fail "--stats does not count the link changes"
  grep -Eq '^  retransmits +[1-9]' "$tmp/out.1" || fail "no retransmission after the link came back"
  echo "three_ops across a link-down: $(grep -c 'fault: lost (link down' "$tmp/t.1") frames lost, identical traces"
  # A real program sees the port down: ibv_devinfo under a link down from the start.
  command -v ibv_devinfo >/dev/null 2>&1 || { echo "ibv_devinfo not installed: port state not checked"; exit 0; }
  run "$tmp/out" run --faults 'link-down=hcasim1@0ns' -- ibv_devinfo -v -d hcasim1
  grep -Eq "state:[[:space:]]+PORT_DOWN \(1\)$" "$tmp/out" || fail "ibv_devinfo does not show PORT_DOWN: $(cat "$tmp/out")"
  grep -Eq "phys_state:[[:space:]]+POLLING \(2\)$" "$tmp/out" || fail "ibv_devinfo does not show POLLING: $(cat "$tmp/out")"
  ;;

three_ops)
  prog=${3:?three_ops}
  run "$tmp/out" run -- "$prog"
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 0 ] || fail "three_ops exited $rc"
  grep -q "^all checks passed$" "$tmp/out" || fail "no 'all checks passed'"
  ;;

devices)
  need_tool ibv_devices
  run "$tmp/out" run -- ibv_devices
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 0 ] || fail "ibv_devices exited $rc"
  for d in hcasim0 hcasim1; do
    grep -Eq "^[[:space:]]+$d[[:space:]]+[0-9a-f]{16}$" "$tmp/out" || fail "ibv_devices does not list $d with a GUID"
  done
  ;;

devinfo)
  need_tool ibv_devinfo
  run "$tmp/out" run -- ibv_devinfo
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 0 ] || fail "ibv_devinfo exited $rc"
  grep -Eq "^hca_id:[[:space:]]+hcasim0$" "$tmp/out" || fail "no hca_id hcasim0"
  grep -Eq "^hca_id:[[:space:]]+hcasim1$" "$tmp/out" || fail "no hca_id hcasim1"
  grep -Eq "link_layer:[[:space:]]+Ethernet$" "$tmp/out" || fail "no 'link_layer: Ethernet'"
  grep -Eq "state:[[:space:]]+PORT_ACTIVE \(4\)$" "$tmp/out" || fail "no 'state: PORT_ACTIVE'"

  run "$tmp/v" run -- ibv_devinfo -v -d hcasim0
  rc=$?
  cat "$tmp/v"
  [ $rc -eq 0 ] || fail "ibv_devinfo -v exited $rc"
  grep -Eq "GID\[ *0\]:[[:space:]]+fe80::[0-9a-f:]+, RoCE v2$" "$tmp/v" || fail "GID index 0 is not fe80::..."
  grep -Eq "GID\[ *1\]:[[:space:]]+::ffff:192\.0\.2\.1, RoCE v2$" "$tmp/v" || fail "GID index 1 is not ::ffff:192.0.2.1"
  ;;

trace)
  prog=${3:?three_ops}
  run "$tmp/out" run --trace "$tmp/trace" -- "$prog"
  rc=$?
  [ $rc -eq 0 ] || { cat "$tmp/out"; fail "three_ops under --trace exited $rc"; }
  [ -s "$tmp/trace" ] || fail "no trace written"
  # The steps in order (each after the previous one), columns: time host unit event qpn facts.
  # The first SQ doorbell (a BlueFlame store: one WR posted, its WQE comes with it), its QPC
  # lookup and the WQE taken without a DMA read; then the RDMA WRITE WITH IMMEDIATE: request
  # packets out and in, the ACK sent, the receiver's CQE and its completion-event decision (the
  # CQE lands while the ACK is on its way), the ACK received, and the interrupt that delivers
  # the event.
  awk '
    BEGIN {
      n = 0
      want[n] = "doorbell";   pat[n++] = "SQ BlueFlame"
      want[n] = "qpc.lookup"; pat[n++] = "SQ doorbell"
      want[n] = "wqe.fetch";  pat[n++] = "^SQ WQE 0 \\(1 WQEBB, BlueFlame\\)"
      want[n] = "pkt.tx";     pat[n++] = "TX WRITE_FIRST"
      want[n] = "pkt.rx";     pat[n++] = "RX WRITE_FIRST"
      want[n] = "pkt.rx";     pat[n++] = "RX WRITE_LAST_IMM"
      want[n] = "pkt.tx";     pat[n++] = "TX ACK .*AETH\\[ACK"
      want[n] = "cqe.write";  pat[n++] = "RESP_WRITE_IMM .*\\+imm status=0x00"
      want[n] = "event";      pat[n++] = "EVENT"
      want[n] = "ack";        pat[n++] = "^ACK psn="
      want[n] = "irq";        pat[n++] = "MSI-X"
      i = 0
    }
    /^#/ { next }
    i < n && $4 == want[i] {
      facts = $0
      sub(/^[[:space:]]*[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+/, "", facts)
      if (facts ~ pat[i]) { printf "step %2d at line %5d: %s\n", i + 1, NR, $0; i++ }
    }
    END {
      if (i < n) { printf "missing step %d: event %s matching /%s/\n", i + 1, want[i], pat[i]; exit 1 }
    }' "$tmp/trace" || { keep=1; fail "trace lacks a step (or has it out of order)"; }
  # The packet whose arrival completes the message left the requester after the FIRST one.
  awk '$4 == "pkt.tx" && /TX WRITE_FIRST/ { f = NR } $4 == "pkt.tx" && /TX WRITE_LAST_IMM/ && f { ok = 1 }
       END { exit !ok }' "$tmp/trace" || { keep=1; fail "no TX WRITE_LAST_IMM after TX WRITE_FIRST"; }
  ;;

determinism)
  prog=${3:?three_ops}
  # trace_pair TAG ARGS...: two runs with the same arguments; 0 if the traces are byte-identical.
  trace_pair() {
    local tag=$1; shift
    for k in 1 2; do
      run "$tmp/out.$tag.$k" run "$@" --trace "$tmp/trace.$tag.$k" -- "$prog"
      rc=$?
      [ $rc -eq 0 ] || { cat "$tmp/out.$tag.$k"; fail "$tag run $k exited $rc"; }
    done
    [ -s "$tmp/trace.$tag.1" ] || fail "no trace written"
    cmp -s "$tmp/trace.$tag.1" "$tmp/trace.$tag.2"
  }
  # 1. Time driven by the program alone (--idle-us 0): three_ops waits only in verbs calls, so
  #    the same program must give the same trace, byte for byte, every time.
  if ! trace_pair strict --idle-us 0; then
    keep=1
    diff "$tmp/trace.strict.1" "$tmp/trace.strict.2" | head -20 >&2
    fail "two runs of the same program gave different traces (--idle-us 0)"
  fi
  echo "identical traces (--idle-us 0): $(wc -l <"$tmp/trace.strict.1") lines, $(wc -c <"$tmp/trace.strict.1") bytes"
  # 2. Default settings. The idle advance (after 2 ms without a verbs call) can also move time
  #    if the OS stalls the program that long between two calls (a loaded machine, sanitizers),
  #    so a difference is retried; differing three times in a row is a failure.
  ok=0
  for attempt in 1 2 3; do
    if trace_pair "default$attempt"; then ok=1; break; fi
    echo "note: default-settings traces differed on attempt $attempt:" >&2
    diff "$tmp/trace.default$attempt.1" "$tmp/trace.default$attempt.2" | head -4 >&2
  done
  if [ $ok != 1 ]; then
    keep=1
    fail "two runs of the same program gave different traces (default settings, 3 attempts)"
  fi
  cmp -s "$tmp/trace.strict.1" "$tmp/trace.default$attempt.1" || {
    keep=1
    fail "default settings and --idle-us 0 gave different traces for a program that waits in verbs"
  }
  echo "identical traces (default settings, attempt $attempt)"
  ;;

*)
  fail "unknown mode $mode"
  ;;
esac
echo "PASS: $mode"
