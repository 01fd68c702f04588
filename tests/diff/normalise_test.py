#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""normalise_test.py: pins the capture normalisation of diffcheck.py (ctest diff.normalise).

  normalise_test.py DIFF_SCENARIO WORKDIR

Runs the `send` and `read` scenarios on the simulator with a capture, then builds a second
capture the way rxe's timer makes one (docs/rxe.md, "Spurious retransmissions"): every frame of
the 3-packet SEND is sent again after its ACK, and answered by one ACK per duplicate packet; the
READ request is sent again and the responder replays all five responses. The normalised
sequences of both captures must be identical, the collapse counts exactly those frames, and the
simulator's own capture must have nothing to collapse.
"""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import diffcheck  # noqa: E402


def read_pcap(path):
    data = open(path, "rb").read()
    head, off, recs = data[:24], 24, []
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    while off + 16 <= len(data):
        ts_s, ts_f, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        recs.append((data[off:off + 16], data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return head, recs


def write_pcap(path, head, recs):
    with open(path, "wb") as f:
        f.write(head)
        for h, body in recs:
            f.write(h + body)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    pcap, log = os.path.join(work, "sim.pcap"), os.path.join(work, "sim.log")
    env = dict(os.environ, HCASIM_PCAP=pcap, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")
    with open(log, "w") as f:
        subprocess.run([binary, "--local", "--scenario", "send,read"], env=env, stdout=f, check=True)
    frames = diffcheck.tshark_frames(pcap)
    head, recs = read_pcap(pcap)
    if len(frames) != len(recs):
        print(f"FAILED: tshark sees {len(frames)} RoCEv2 frames, the file has {len(recs)} records")
        return 1
    ops = [int(fr["infiniband.bth.opcode"]) for fr in frames]
    # send: SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY(0 B), ACK, ACK (in some order);
    # read: READ_REQUEST then 5 responses.
    idx = {}
    for i, op in enumerate(ops):
        idx.setdefault(op, []).append(i)
    try:
        first, middle, last = idx[0][0], idx[1][0], idx[2][0]
        acks = idx[17]
        read_req = idx[12][0]
        responses = sorted(idx[13] + idx[14] + idx[15])
    except (KeyError, IndexError):
        print(f"FAILED: unexpected frames in the capture: opcodes {ops}")
        return 1
    ack_last = next(a for a in acks if frames[a]["infiniband.bth.psn"] == frames[last]["infiniband.bth.psn"])
    dup = list(recs)
    # rxe's spurious retransmission of the SEND: FIRST/MIDDLE/LAST again, one ACK per duplicate
    # packet (PSNs of FIRST and MIDDLE are below the last ACK: nothing new).
    dup += [recs[first], recs[middle], recs[last], recs[ack_last], recs[ack_last], recs[ack_last]]
    # A re-sent READ request and the replayed responses.
    dup += [recs[read_req]] + [recs[r] for r in responses]
    dpcap = os.path.join(work, "dup.pcap")
    write_pcap(dpcap, head, dup)

    logobj = diffcheck.Log([log])
    a, sa, _ = diffcheck.normalise(pcap, logobj)
    b, sb, _ = diffcheck.normalise(dpcap, logobj)
    ok = True
    for sc in ("send", "read"):
        for d in diffcheck.DIRS:
            if a[sc][d] != b[sc][d]:
                ok = False
                print(f"FAILED: {sc} {d}: the normalised sequences differ:\n  {a[sc][d]}\n  {b[sc][d]}")
        if sa[sc]["retransmitted"] or sa[sc]["duplicate_responses"]:
            ok = False
            print(f"FAILED: {sc}: the simulator's own capture has collapsed frames: {dict(sa[sc])}")
    want = {"send": (3, 3), "read": (1, 5)}
    for sc, (rt, dr) in want.items():
        got = (sb[sc]["retransmitted"], sb[sc]["duplicate_responses"])
        if got != (rt, dr):
            ok = False
            print(f"FAILED: {sc}: collapsed {got} (retransmitted, duplicate responses), want {(rt, dr)}")
    for sc in ("send", "read"):
        print(f"{sc}: A>B {len(a[sc]['A>B'])} frames, B>A {len(a[sc]['B>A'])}; with the re-sent frames: "
              f"{sb[sc]['retransmitted']} retransmitted and {sb[sc]['duplicate_responses']} duplicate responses "
              "collapsed")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
