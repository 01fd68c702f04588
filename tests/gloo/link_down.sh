#!/bin/sh
# link_down.sh GLOO_ALLREDUCE [ARGS...]: runs gloo_allreduce (ranks as threads, Gloo's sync mode)
# with HCASIM_FAULTS taking a host's link down for good, and passes only if the job failed
# cleanly because the transport found the link gone:
#   - the simulator reported a send completing with IBV_WC_RETRY_EXC_ERR (a QP ran out of
#     retries: the downed link was detected by RC, as on hardware), before the job's error;
#   - the program exited with status 3 (a Gloo runtime error; not 0, not 1 = a wrong result,
#     not a signal or abort) and printed one rank's error, and that error is one of exactly two:
#       gloo::EnforceNotMet "... transport retry counter exceeded"   (a rank polled the failed CQE)
#       gloo::IoException "Read timeout ..."                         (Gloo's own timeout, later)
#   - no rank printed a wrong result.
# A hang is caught by the test's ctest TIMEOUT.
#
# Why both errors are legitimate outcomes of a downed link (Debian's Gloo is git 5b14351 of
# May 2022; its messages name pair.cc:430 and buffer.cc:83 of that source):
#   - each Pair has its own CQ (gloo/transport/ibverbs/pair.cc:41, ibv_create_cq in Pair::Pair);
#   - a failed completion becomes an error only when a thread polls that CQ: pair.cc:430-436,
#     Pair::handleCompletion, GLOO_ENFORCE_EQ(wc->status, IBV_WC_SUCCESS, "Send for slot ", slot,
#     ": ", ibv_wc_status_str(wc->status)) (pair.cc:475-481 likewise, "Memory region send");
#   - in sync mode a waiting thread polls only the CQ of the pair it waits on, until the context
#     timeout: buffer.cc:78-84, Buffer::waitRecv, `while (recvCompletions_ == 0) {
#     pair_->pollCompletions(); if (... >= timeout) signalIoFailure("Read timeout ", peer) }`;
#   - RC tells only a requester with sends in flight that its peer is gone (retry exhaustion
#     after Gloo's timeout 14 and retry_cnt 7, pair.cc:180-181: 8 x 67 ms, about 0.54 s); a QP
#     that only waits to receive never completes in error, on any device.
# So if a thread whose sends crossed the dead link waits on that pair, it throws EnforceNotMet
# about 0.54 s after the link went down. But where the four threads stand in the ring or the
# barrier at that moment is up to the scheduler: each may be waiting to receive on a pair whose
# peer is itself stuck (rank 0 on rank 1, rank 3 on rank 0, ...), the failed CQEs lying in CQs
# no waiting thread polls, and then the first error is Gloo's Read timeout, after the context
# timeout (30 s). Measured on the simulator: 4 runs of 80 (two loops at once), each with its
# IBV_WC_RETRY_EXC_ERR completions written 0.58-0.64 s into the run and the Read timeout at
# 30.04 s. (hcasim-verbs met the same stall in its own ring and sends liveness probes for it:
# docs/verbs.md, "A rank learns of a broken link from its own completions only if ...". Gloo
# has no such probe.) Anything else (a Send timeout, a flush error first, no retry exhaustion)
# is not explained by this and fails.
set -u
[ $# -ge 1 ] || { echo "usage: link_down.sh GLOO_ALLREDUCE [ARGS...]" >&2; exit 2; }
[ -n "${HCASIM_FAULTS:-}" ] || { echo "link_down: set HCASIM_FAULTS (link-down=...)" >&2; exit 2; }
log=$(mktemp) && rcf=$(mktemp) || exit 1
trap 'rm -f "$log" "$rcf"' EXIT
# The simulator's plain-words error lines (on by default; asked for here since the check reads them).
{ HCASIM_EXPLAIN=1 "$@" 2>&1; echo $? >"$rcf"; } | tee "$log"
rc=$(cat "$rcf")
fail() { echo "link_down: FAIL: $*" >&2; exit 1; }

if grep -qE 'WRONG|wrong elements' "$log"; then fail "a rank computed a wrong result"; fi
[ "$rc" -eq 3 ] || fail "exit status $rc, expected 3 (a Gloo runtime error)"
errs=$(grep -n '^gloo_allreduce: rank [0-9]*: ' "$log")
[ -n "$errs" ] || fail "no rank reported an error"
[ "$(printf '%s\n' "$errs" | wc -l)" -eq 1 ] || fail "more than one rank error line"
err_line=${errs%%:*}
retry_line=$(grep -n 'completed with IBV_WC_RETRY_EXC_ERR' "$log" | head -n 1 | cut -d: -f1)
if [ -z "$retry_line" ] || [ "$retry_line" -gt "$err_line" ]; then
  fail "no send completed with IBV_WC_RETRY_EXC_ERR before the job's error: the downed link was not detected by the transport"
fi
case "$errs" in
  *": gloo::EnforceNotMet: "*": transport retry counter exceeded") what="a rank polled its QP's retry-exceeded completion" ;;
  *": gloo::IoException: "*"] Read timeout "*) what="Gloo's own read timeout fired, the retry-exceeded completions in CQs no waiting thread polls" ;;
  *) fail "unexpected error: ${errs#*:}" ;;
esac
echo "link_down: the job failed cleanly after the link went down: $what"
