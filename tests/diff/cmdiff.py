#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The rdma_cm half of the differential suite (docs/differential.md, "Connection management").

Unmodified rdmacm-utils/perftest programs run as a server and a client on the simulator and on
rxe (two QEMU guests); run-cm-diff collects, per tool, the CM events each side took
(cm_event_log.so) and the capture. This script normalises them and compares:

  cmdiff.py mads PCAP SERVER_IP TOOL=PORT[,TOOL=PORT...] OUTDIR
      the CM MADs (QP1) of a capture, split by tool, as OUTDIR/TOOL.mads
  cmdiff.py normalise DIR TOOL...
      the normalised observations of each tool (stdout)
  cmdiff.py compare --sim DIR --rxe DIR|FILE --known FILE TOOL...
      simulator against rxe (a run directory, or a recorded normalised file), every difference
      documented in FILE or the comparison fails (exit 1); a documented difference no longer
      seen fails too.

Normalised form, one block per tool:
  TOOL server id: CONNECT_REQUEST ESTABLISHED teardown   (one line per rdma_cm id)
  TOOL client id: ADDR_RESOLVED ROUTE_RESOLVED ESTABLISHED teardown
  TOOL mad c:REQ s:REP c:RTU                            (one line per exchange: c sent, s sent)
  TOOL mad teardown DREP DREQ
Ids are anonymous and their lines sorted: which of several connections is served first is
timing, not protocol. A non-zero event status is kept (REJECTED(28)). An id's disconnection is one
word, "teardown", from its first DISCONNECTED or its program's own rdma_disconnect (logged as
"disconnect()") on: which side disconnects first when both do, and whether a program waits for
its DISCONNECTED before it exits (rping's client does not), are timing; for programs that end a
connection only by destroying its id (rsockets, CLOSE_RACES), whether a DISCONNECTED is read at
all is timing, and it is left out. The MADs up to the first
DREQ are grouped by transaction ID (a REQ, its REP and RTU share one), in wire order within an
exchange, exchanges sorted (which connection goes first is timing); the rest is summed up as
the kinds of message seen ("TOOL mad teardown DREP DREQ"): when both programs disconnect at
once, which DREQ leaves first, whether both do, and when each is answered are timing (rxe shows
all of these run to run).
"""
import collections
import difflib
import subprocess
import sys

CM_ATTRS = {0x10: "REQ", 0x11: "MRA", 0x12: "REJ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ",
            0x16: "DREP", 0x17: "SIDR_REQ", 0x18: "SIDR_REP", 0x19: "LAP", 0x1A: "APR"}


def read_mads(pcap, server_ip):
    """(transaction ID, direction, name, dport, reason) of every MAD to QP1, in capture order."""
    fields = ["ip.src", "infiniband.mad.transactionid", "infiniband.mad.attributeid",
              "infiniband.cm.req.serviceid.dport", "infiniband.cm.rej.reason"]
    cmd = ["tshark", "-r", pcap, "--disable-heuristic", "rpcrdma_infiniband", "-Y",
           "infiniband.bth.destqp == 1", "-T", "fields", "-E", "separator=|"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    mads = []
    for row in out.splitlines():
        src, tid, attr, dport, reason = (row.split("|") + [""] * 5)[:5]
        if not attr:
            continue
        name = CM_ATTRS.get(int(attr, 16), f"attr{attr}")
        if name == "REJ" and reason:
            name += f"({int(reason, 16)})"
        who = "s" if src == server_ip else "c"
        mads.append((tid, who, name, int(dport, 16) if dport else None))
    return mads


def split_mads(mads, portmap):
    """Frames of one capture, per tool: a new tool starts at a REQ to its port (or a SIDR_REQ)."""
    by_port = {port: tool for tool, port in portmap.items() if port != "sidr"}
    sidr_tool = next((t for t, p in portmap.items() if p == "sidr"), None)
    per_tool, current = collections.defaultdict(list), None
    for tid, who, name, dport in mads:
        if name == "REQ" and dport in by_port:
            current = by_port[dport]
        elif name == "SIDR_REQ" and sidr_tool:
            current = sidr_tool
        if current is not None:
            per_tool[current].append(f"{tid} {who}:{name}")
    return per_tool


def cmd_mads(pcap, server_ip, spec, outdir):
    portmap = {}
    for item in spec.split(","):
        tool, port = item.split("=")
        portmap[tool] = port if port == "sidr" else int(port)
    per_tool = split_mads(read_mads(pcap, server_ip), portmap)
    for tool in portmap:
        with open(f"{outdir}/{tool}.mads", "w") as f:
            f.writelines(line + "\n" for line in per_tool.get(tool, []))
    return 0


# Programs whose connections end by destroying their CM ids (rsockets: rclose destroys the id,
# whose DREQ ends the peer's; nobody calls rdma_disconnect): a DISCONNECTED one side reads
# comes only if the peer's DREQ arrives before this side's own rclose, a race between the two
# programs' closes that rxe shows both ways from run to run. For these, the ids' lines leave out
# that "teardown"; the DREQ and DREP on the wire are still compared.
CLOSE_RACES = {"rstream", "riostream", "rcopy"}


def event_lines(path, close_races=False):
    """One line per id: its events in the order the program took them, ids sorted. With
    close_races, a disconnection the program did not ask for is left out (CLOSE_RACES)."""
    seqs = collections.OrderedDict()
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return ["(no events logged)"]
    for line in lines:
        ident, event, status = line.split()
        seq = seqs.setdefault(ident, [])
        if seq and seq[-1] == "teardown":
            continue
        code = int(status.split("=")[1])
        teardown = event in ("disconnect()", "DISCONNECTED", "TIMEWAIT_EXIT")
        if teardown and close_races and event != "disconnect()":
            continue
        seq.append("teardown" if teardown else event + (f"({code})" if code else ""))
    return sorted(" ".join(s) for s in seqs.values())


def mad_lines(path):
    """One line per exchange up to the first DREQ (its MADs by transaction ID, in wire order:
    "c:REQ s:REP c:RTU"), sorted; then the kinds of message seen after it ("teardown DREP DREQ")."""
    try:
        rows = [l.split() for l in open(path).read().splitlines() if l]
    except FileNotFoundError:
        return ["(no capture)"]
    exchanges, teardown = collections.OrderedDict(), set()
    for tid, msg in rows:
        if teardown or msg.endswith(":DREQ"):
            teardown.add(msg.split(":")[1])
        else:
            exchanges.setdefault(tid, []).append(msg)
    out = sorted(" ".join(e) for e in exchanges.values())
    return out + (["teardown " + " ".join(sorted(teardown))] if teardown else [])


def normalise(d, tool):
    races = tool in CLOSE_RACES
    out = [f"{tool} server id: {s}" for s in event_lines(f"{d}/{tool}.server.events", races)]
    out += [f"{tool} client id: {s}" for s in event_lines(f"{d}/{tool}.client.events", races)]
    return out + [f"{tool} mad {m}" for m in mad_lines(f"{d}/{tool}.mads")]


def observations(src, tools):
    """A run directory's normalised lines, or those of a recorded file, for these tools."""
    import os
    if os.path.isdir(src):
        return [line for t in tools for line in normalise(src, t)]
    lines = [l for l in open(src).read().splitlines() if l and not l.startswith("#")]
    return [l for l in lines if l.split(" ", 1)[0] in tools]


def read_known(path):
    """id | tool | simulator line | rxe line | why | source ('-' = no such line)."""
    entries = []
    for raw in open(path).read().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        f = [x.strip() for x in raw.split(" | ")]
        if len(f) != 6:
            sys.exit(f"cmdiff: {path}: expected 6 fields separated by ' | ': {raw}")
        entries.append(dict(id=f[0], tool=f[1], sim=f[2], rxe=f[3], why=f[4], source=f[5]))
    return entries


def apply_known(sim, rxe, known, tools):
    """Rewrite rxe's lines by the documented differences; returns the entries not seen."""
    stale = []
    for e in known:
        if e["tool"] not in tools:
            continue
        full_sim = f"{e['tool']} {e['sim']}"
        full_rxe = f"{e['tool']} {e['rxe']}"
        seen_rxe = e["rxe"] == "-" or full_rxe in rxe
        seen_sim = e["sim"] == "-" or full_sim in sim
        if not (seen_rxe and seen_sim):
            stale.append(e)
            continue
        if e["rxe"] != "-":
            rxe[rxe.index(full_rxe)] = full_sim if e["sim"] != "-" else None
        elif e["sim"] != "-":
            sim[sim.index(full_sim)] = None
    sim[:] = [l for l in sim if l is not None]
    rxe[:] = [l for l in rxe if l is not None]
    return stale


def cmd_compare(args):
    opts, tools = {}, []
    it = iter(args)
    for a in it:
        if a in ("--sim", "--rxe", "--known"):
            opts[a] = next(it)
        else:
            tools.append(a)
    sim = observations(opts["--sim"], tools)
    rxe = observations(opts["--rxe"], tools)
    known = read_known(opts["--known"])
    stale = apply_known(sim, rxe, known, tools)
    # Compare as sorted per-tool blocks: event lines are sorted already, MAD lines keep order.
    diff = list(difflib.unified_diff(rxe, sim, "rxe", "simulator", lineterm="", n=1))
    for e in stale:
        print(f"cmdiff: documented difference '{e['id']}' ({e['tool']}) was not seen: stale entry")
    if diff:
        print("cmdiff: undocumented differences (- rxe, + simulator):")
        print("\n".join(diff))
    used = len([e for e in known if e["tool"] in tools]) - len(stale)
    print(f"cmdiff: {len(tools)} tool(s), {len(sim)} simulator lines; {used} documented difference(s) "
          f"applied; {'FAILED' if diff or stale else 'no undocumented difference'}")
    return 1 if diff or stale else 0


def main(argv):
    if len(argv) >= 5 and argv[0] == "mads":
        return cmd_mads(argv[1], argv[2], argv[3], argv[4])
    if len(argv) >= 3 and argv[0] == "normalise":
        for t in argv[2:]:
            print("\n".join(normalise(argv[1], t)))
        return 0
    if argv and argv[0] == "compare":
        return cmd_compare(argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
