#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""diffcheck.py: the differential suite's comparisons (docs/differential.md).

  diffcheck.py logs --sim LOG... --rxe LOG... [--mode local|two] [--known FILE]
      Compares the canonical logs of tests/diff/scenario.cpp (diff_scenario) from the simulator
      and from rxe, scenario by scenario and side by side (A, B). Several files per side are
      merged (a --client and a --server log).
  diffcheck.py pcap --sim-pcap P --sim-log LOG... --rxe-pcap P --rxe-log LOG... [--known FILE]
      Normalises both captures (below) and compares them per scenario and direction.
  diffcheck.py expect --log LOG... [--pcap P] --expected DIR [--scenario NAME...]
      The simulator-only self-check: the simulator's log (and normalised capture) of each
      scenario against tests/diff/expected/<scenario>.txt, the behaviour IBTA and the man pages
      require.
  diffcheck.py normalise --pcap P --log LOG...     print the normalised capture
  diffcheck.py render-known [--known FILE] [--check DOC]
      The known differences as a Markdown table; --check: fail unless DOC contains it.

Every difference found is either listed in known_differences.txt (one line each: where it
shows, the simulator's and rxe's lines, a class, the reason and the source) or reported as
UNDOCUMENTED. Exit status: 0 when every difference is a documented one of class `rxe` or
`undefined` and every entry that applies to the comparison was seen; 1 otherwise (an
undocumented difference, an entry no longer seen, or a difference of class `sim-bug`: an open
simulator bug, reported until it is fixed); 2 on bad input.

Capture normalisation (both captures alike): RoCEv2 frames (UDP 4791) decoded by tshark; each
frame is assigned to its scenario and its side by its PSN (diff_scenario gives every scenario's
QPs their own initial PSNs and prints them) and its opcode (a request carries its sender's PSN,
a response the requester's); PSNs become offsets from the initial PSN; QPNs, addresses, keys,
checksums and timestamps are dropped; the two directions are compared separately (their
interleaving depends on timing). Then retransmissions are collapsed: a request whose PSN is not
beyond the highest already sent, an ACK that acknowledges nothing new and a NAK or read response
identical to an earlier one are dropped and counted (RNR retries, rxe's spurious
retransmissions: docs/rxe.md).
"""
import argparse
import collections
import difflib
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_KNOWN = os.path.join(HERE, "known_differences.txt")
REPO = os.path.dirname(os.path.dirname(HERE))

# Exit statuses: everything documented; a failure; only open simulator bugs (class sim-bug) stand
# between this comparison and success (run-diff turns that into ctest's SKIP status, 77).
EXIT_OK, EXIT_FAIL, EXIT_BUG = 0, 1, 3

SIDES = ("A", "B")
DIRS = ("A>B", "B>A")
CLASSES = {
    "rxe": "rxe departs from IBTA / the man page; the simulator follows it",
    "undefined": "a field or policy the specification leaves open; both are correct",
    "sim-bug": "OPEN SIMULATOR BUG: the simulator departs from the specification",
}


def fail_input(msg):
    print("diffcheck: " + msg, file=sys.stderr)
    sys.exit(2)


# ---- logs ----------------------------------------------------------------------------------------

META_RE = re.compile(r"^# (\S+) qpn A=0x([0-9a-f]+) B=0x([0-9a-f]+) psn A=0x([0-9a-f]+) B=0x([0-9a-f]+) mtu=(\d+)")
# A later QP pair of a scenario (Run::new_qps: its PSNs stay in the scenario's range) and a memory
# window key the scenario named (Run::name_key: the IETH of SEND_WITH_INV is printed by that name).
QPS_RE = re.compile(r"^# (\S+) qps phase=\d+ qpn A=0x([0-9a-f]+) B=0x([0-9a-f]+)")
KEY_RE = re.compile(r"^# (\S+) key [AB] (\S+)=0x([0-9a-f]+)$")


class Log:
    """Merged diff_scenario output: lines per (scenario, side), QPN/PSN facts per scenario."""

    def __init__(self, paths):
        self.lines = collections.OrderedDict()  # scenario -> {side: [text]}
        self.meta = {}  # scenario -> dict(qpn_a, qpn_b, psn_a, psn_b, mtu)
        self.modes = set()
        self.complete = True
        for p in paths:
            try:
                with open(p, encoding="utf-8", errors="replace") as f:
                    text = f.read().splitlines()
            except OSError as e:
                fail_input(f"cannot read {p}: {e}")
            done = False
            for raw in text:
                line = raw.rstrip()
                if line.startswith("[server] "):
                    line = line[len("[server] "):]
                if not line:
                    continue
                if line.startswith("#"):
                    m = META_RE.match(line)
                    if m:
                        sc = m.group(1)
                        self.meta.setdefault(sc, {}).update(
                            qpn_a=int(m.group(2), 16), qpn_b=int(m.group(3), 16), psn_a=int(m.group(4), 16),
                            psn_b=int(m.group(5), 16), mtu=int(m.group(6)))
                        self.lines.setdefault(sc, {s: [] for s in SIDES})
                    for m in (m, QPS_RE.match(line)):
                        if m:
                            meta = self.meta.setdefault(m.group(1), {})
                            meta.setdefault("qpns_a", set()).add(int(m.group(2), 16))
                            meta.setdefault("qpns_b", set()).add(int(m.group(3), 16))
                    m = KEY_RE.match(line)
                    if m:
                        self.meta.setdefault(m.group(1), {}).setdefault("keys", {})[int(m.group(3), 16)] = m.group(2)
                    m = re.match(r"^# diff_scenario mode=(\S+)", line)
                    if m:
                        self.modes.add(m.group(1))
                    if line == "# diff_scenario done":
                        done = True
                    continue
                parts = line.split(" ", 2)
                if len(parts) < 3 or parts[1] not in SIDES:
                    continue  # not an observation (e.g. a stray message)
                sc, side, obs = parts
                self.lines.setdefault(sc, {s: [] for s in SIDES})[side].append(obs)
            if not done:
                self.complete = False
                print(f"diffcheck: {p}: no '# diff_scenario done' line: the run did not finish", file=sys.stderr)

    def scenarios(self):
        return list(self.lines.keys())


# ---- known differences ---------------------------------------------------------------------------


class Entry:
    def __init__(self, lineno, fields):
        (self.id, self.cls, self.mode, self.where, self.sim, self.rxe, self.reason, self.source) = fields
        self.lineno = lineno
        self.seen = 0
        if self.cls not in CLASSES:
            fail_input(f"known differences line {lineno}: class '{self.cls}' is not one of {', '.join(CLASSES)}")
        if self.mode not in ("any", "local", "two"):
            fail_input(f"known differences line {lineno}: mode '{self.mode}' is not any, local or two")
        if self.where.startswith("rule:"):
            self.kind = "rule"
            self.domain = self.where[len("rule:"):]  # log | pcap
            try:
                self.regex = re.compile(self.rxe)
            except re.error as e:
                fail_input(f"known differences line {lineno}: bad regex: {e}")
            self.scenario = None
        else:
            self.kind = "line"
            parts = self.where.split(":")
            if len(parts) != 3 or parts[0] not in ("log", "pcap"):
                fail_input(f"known differences line {lineno}: where '{self.where}' is not log:SCENARIO:SIDE, "
                           "pcap:SCENARIO:DIR or rule:log|pcap")
            self.domain, self.scenario, self.part = parts
        self.sim_line = None if self.sim == "-" else self.sim
        self.rxe_line = None if self.rxe == "-" else self.rxe

    def applies(self, mode):
        return mode is None or self.mode == "any" or self.mode == mode


def read_known(path):
    entries = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, raw in enumerate(f, 1):
                line = raw.rstrip("\n")
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                fields = [x.strip() for x in line.split(" | ")]
                if len(fields) != 8:
                    fail_input(f"{path}:{n}: want 8 fields separated by ' | ', got {len(fields)}")
                entries.append(Entry(n, fields))
    except OSError as e:
        fail_input(f"cannot read {path}: {e}")
    ids = collections.Counter(e.id for e in entries)
    dup = [i for i, c in ids.items() if c > 1]
    if dup:
        fail_input(f"{path}: duplicate ids {dup}")
    return entries


# ---- comparison ----------------------------------------------------------------------------------


class Report:
    def __init__(self, title):
        self.title = title
        self.known = []  # (entry, where, sim, rxe)
        self.undocumented = []  # (where, sim, rxe)
        self.rule_hits = collections.Counter()
        self.info = []
        self.compared = 0

    def print_and_status(self, entries, mode, scenarios_compared, domain):
        print(f"== {self.title}")
        for line in self.info:
            print("   " + line)
        for e, where, s, r in self.known:
            tag = "OPEN SIMULATOR BUG" if e.cls == "sim-bug" else f"known ({e.cls})"
            print(f"   {tag} [{e.id}] {where}\n       sim: {s if s is not None else '(absent)'}\n"
                  f"       rxe: {r if r is not None else '(absent)'}")
        for e in entries:
            if e.kind == "rule" and e.domain == domain and e.applies(mode) and self.rule_hits[e.id]:
                print(f"   known ({e.cls}) [{e.id}] rule applied to {self.rule_hits[e.id]} line(s)")
        for where, s, r in self.undocumented:
            print(f"   UNDOCUMENTED difference {where}\n       sim: {s if s is not None else '(absent)'}\n"
                  f"       rxe: {r if r is not None else '(absent)'}")
        stale, masked = [], []
        for e in entries:
            if e.domain != domain or not e.applies(mode):
                continue
            if e.kind == "rule":
                if not self.rule_hits[e.id]:
                    stale.append(e)
            elif e.scenario in scenarios_compared and not e.seen:
                # An open simulator bug that makes the simulator do what rxe does (a sim-bug entry
                # and an rxe entry with the same two lines swapped): neither shows here.
                partner = next((p for p in entries if p is not e and p.kind == "line" and p.where == e.where and
                                (p.cls == "sim-bug") != (e.cls == "sim-bug") and p.sim_line == e.rxe_line and
                                p.rxe_line == e.sim_line and not p.seen), None)
                if partner is None:
                    stale.append(e)
                elif e.cls == "sim-bug":
                    masked.append((e, partner))
        for e in stale:
            print(f"   STALE known difference [{e.id}] ({e.where}): not seen in this comparison; "
                  f"the entry in known_differences.txt (line {e.lineno}) is out of date")
        for bug, other in masked:
            print(f"   OPEN SIMULATOR BUG [{bug.id}] {bug.where}: the simulator does what rxe does, so the "
                  f"documented rxe difference [{other.id}] cannot show\n       both: "
                  f"{bug.sim_line if bug.sim_line is not None else '(absent)'}\n"
                  f"       required: {bug.rxe_line if bug.rxe_line is not None else '(absent)'}")
            self.known.append((bug, bug.where + " (masked)", bug.sim_line, bug.sim_line))
        bugs = [k for k in self.known if k[0].cls == "sim-bug"]
        if self.undocumented or stale:
            status = "FAILED"
        elif bugs:
            status = "OPEN SIMULATOR BUG(S)"
        else:
            status = "OK"
        print(f"   {self.compared} line(s) compared, {len(self.known)} documented difference(s)"
              f"{' (' + str(len(bugs)) + ' open simulator bug(s))' if bugs else ''}, "
              f"{len(self.undocumented)} undocumented, {len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'}: "
              f"{status}")
        return {"OK": EXIT_OK, "FAILED": EXIT_FAIL}.get(status, EXIT_BUG)


def apply_rules(lines, entries, domain, mode, report):
    out = []
    for l in lines:
        for e in entries:
            if e.kind == "rule" and e.domain == domain and e.applies(mode):
                new, n = e.regex.subn(e.sim, l)
                if n:
                    report.rule_hits[e.id] += 1
                    l = new
        out.append(l)
    return out


def pair_key(domain, line):
    """Lines that say the same kind of thing (the same CQ, WR, buffer range, packet opcode) are
    paired inside a differing stretch; the rest stand against an absent line."""
    w = line.split()
    if domain != "log" or not w:
        return w[0] if w else ""
    if w[0] == "wc":
        return w[1]
    if w[0] in ("post_send", "post_recv", "mem", "u64", "qp") and len(w) > 1:
        return w[0] + " " + (w[1] if w[0] != "qp" else "")
    return w[0]


def pair_lines(domain, a, b):
    used, out = set(), []
    for s in a:
        k = pair_key(domain, s)
        j = next((j for j in range(len(b)) if j not in used and pair_key(domain, b[j]) == k), None)
        if j is None:
            out.append((s, None))
        else:
            used.add(j)
            out.append((s, b[j]))
    out += [(None, b[j]) for j in range(len(b)) if j not in used]
    return out


def compare_seqs(sim, rxe, domain, scenario, part, entries, mode, report, rules=True, classes=None):
    """Diffs two line sequences; every differing line pair must match a known entry (of one of
    @p classes, default any)."""
    if rules:
        rxe = apply_rules(rxe, entries, domain, mode, report)
    report.compared += max(len(sim), len(rxe))
    where = f"{domain}:{scenario}:{part}"
    sm = difflib.SequenceMatcher(a=sim, b=rxe, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        for s, r in pair_lines(domain, sim[i1:i2], rxe[j1:j2]):
            match = None
            for e in entries:
                if (e.kind == "line" and e.domain == domain and e.scenario == scenario and e.part == part and
                        e.applies(mode) and e.sim_line == s and e.rxe_line == r and
                        (classes is None or e.cls in classes)):
                    match = e
                    break
            if match:
                match.seen += 1
                report.known.append((match, where, s, r))
            else:
                report.undocumented.append((where, s, r))


def cmd_logs(args):
    sim, rxe = Log(args.sim), Log(args.rxe)
    entries = read_known(args.known)
    report = Report(f"logs: simulator ({' '.join(args.sim)}) vs rxe ({' '.join(args.rxe)}), mode {args.mode}")
    ok_input = sim.complete and rxe.complete
    scen = [s for s in sim.scenarios()]
    for s in rxe.scenarios():
        if s not in scen:
            report.undocumented.append((f"log:{s}", None, "(scenario only in the rxe log)"))
    compared = set()
    for s in scen:
        if s not in rxe.lines:
            report.undocumented.append((f"log:{s}", "(scenario only in the simulator log)", None))
            continue
        compared.add(s)
        for side in SIDES:
            compare_seqs(sim.lines[s][side], rxe.lines[s][side], "log", s, side, entries, args.mode, report)
    report.info.append(f"scenarios: {', '.join(sorted(compared))}")
    rc = report.print_and_status(entries, args.mode, compared, "log")
    if not ok_input:
        print("   a log is incomplete (no '# diff_scenario done'): FAILED")
        return EXIT_FAIL
    return rc


# ---- captures ------------------------------------------------------------------------------------

OPCODES = {
    0: "SEND_FIRST", 1: "SEND_MIDDLE", 2: "SEND_LAST", 3: "SEND_LAST_IMM", 4: "SEND_ONLY", 5: "SEND_ONLY_IMM",
    6: "WRITE_FIRST", 7: "WRITE_MIDDLE", 8: "WRITE_LAST", 9: "WRITE_LAST_IMM", 10: "WRITE_ONLY",
    11: "WRITE_ONLY_IMM", 12: "READ_REQUEST", 13: "READ_RESPONSE_FIRST", 14: "READ_RESPONSE_MIDDLE",
    15: "READ_RESPONSE_LAST", 16: "READ_RESPONSE_ONLY", 17: "ACK", 18: "ATOMIC_ACK", 19: "CMP_SWAP",
    20: "FETCH_ADD", 22: "SEND_LAST_INV", 23: "SEND_ONLY_INV",
    # UC (BTH opcode 0x20 + n, IBTA 9.2 table 38): SEND and RDMA WRITE only, never a response.
    32: "UC_SEND_FIRST", 33: "UC_SEND_MIDDLE", 34: "UC_SEND_LAST", 35: "UC_SEND_LAST_IMM", 36: "UC_SEND_ONLY",
    37: "UC_SEND_ONLY_IMM", 38: "UC_WRITE_FIRST", 39: "UC_WRITE_MIDDLE", 40: "UC_WRITE_LAST",
    41: "UC_WRITE_LAST_IMM", 42: "UC_WRITE_ONLY", 43: "UC_WRITE_ONLY_IMM",
    # UD (0x64, 0x65): one packet per message, with a DETH (Q_Key, source QP).
    100: "UD_SEND_ONLY", 101: "UD_SEND_ONLY_IMM",
}
RESPONSES = {13, 14, 15, 16, 17, 18}
NAK_CODES = {0: "PSN_SEQ_ERR", 1: "INVALID_REQUEST", 2: "REMOTE_ACCESS", 3: "REMOTE_OP_ERR", 4: "INVALID_RD_REQUEST"}
FIELDS = ["frame.number", "ip.src", "ip.dst", "udp.length", "infiniband.bth.opcode", "infiniband.bth.se",
          "infiniband.bth.a", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.padcnt",
          "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.reth.dmalen",
          "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt", "infiniband.atomicacketh.origremdt",
          "infiniband.immdt", "infiniband.deth.q_key", "infiniband.deth.srcqp", "infiniband.ieth"]


def tshark_frames(pcap):
    cmd = ["tshark", "-r", pcap, "-n", "--disable-protocol", "rpcordma", "-Y", "udp.dstport == 4791",
           "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    try:
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout
    except FileNotFoundError:
        fail_input("tshark not found (Debian package tshark)")
    except subprocess.CalledProcessError as e:
        fail_input(f"tshark failed on {pcap}: {e.stderr.strip()}")
    frames = []
    for line in out.splitlines():
        v = line.split("\t")
        v += [""] * (len(FIELDS) - len(v))
        frames.append(dict(zip(FIELDS, v)))
    return frames


def as_int(s):
    s = s.strip()
    if not s:
        return None
    return int(s, 0)


def boolish(s):
    return s.strip() in ("1", "True", "true")


def aeth_text(syn):
    kind = (syn >> 5) & 3
    low = syn & 0x1f
    if kind == 0:
        return f"ACK(credits={low})"
    if kind == 1:
        return f"RNR_NAK(timer={low})"
    if kind == 3:
        return f"NAK({NAK_CODES.get(low, low)})"
    return f"AETH(0x{syn:02x})"


def normalise(pcap, log):
    """-> ({scenario: {dir: [lines]}}, {scenario: {'retransmitted': n, 'duplicate_responses': n}}, notes)"""
    spaces = []  # (base, scenario, owner side)
    for sc, m in log.meta.items():
        spaces.append((m["psn_a"], sc, "A"))
        spaces.append((m["psn_b"], sc, "B"))
    seqs = {sc: {d: [] for d in DIRS} for sc in log.meta}
    stats = {sc: collections.Counter() for sc in log.meta}
    notes = []
    state = {sc: {"max_req": {d: -1 for d in DIRS}, "max_ack": {d: -1 for d in DIRS},
                  "seen_resp": {d: set() for d in DIRS}, "src": {}} for sc in log.meta}
    unassigned = 0
    for fr in tshark_frames(pcap):
        op = as_int(fr["infiniband.bth.opcode"])
        psn = as_int(fr["infiniband.bth.psn"])
        if op is None or psn is None:
            unassigned += 1
            continue
        owner = None
        for base, sc, side in spaces:
            if base <= psn < base + 0x1000:
                owner = (sc, side, psn - base)
                break
        if owner is None:
            unassigned += 1
            continue
        sc, space, rel = owner
        is_resp = op in RESPONSES
        sender = ({"A": "B", "B": "A"}[space]) if is_resp else space
        d = f"{sender}>{'B' if sender == 'A' else 'A'}"
        st = state[sc]
        src = fr["ip.src"]
        if st["src"].setdefault(sender, src) != src:
            notes.append(f"{sc}: side {sender}'s frames come from two addresses ({st['src'][sender]}, {src})")
        dst_qpn = as_int(fr["infiniband.bth.destqp"])
        want_qpns = log.meta[sc].get("qpns_b" if sender == "A" else "qpns_a", set()) - {0}
        if dst_qpn is not None and want_qpns and dst_qpn not in want_qpns:
            notes.append(f"{sc}: frame {fr['frame.number']} to QPN 0x{dst_qpn:x}, expected "
                         f"{' or '.join(f'0x{q:x}' for q in sorted(want_qpns))}")
        parts = [OPCODES.get(op, f"OP{op}"), f"psn={space}+{rel}"]
        if boolish(fr["infiniband.bth.se"]):
            parts.append("SE")
        if boolish(fr["infiniband.bth.a"]):
            parts.append("AckReq")
        parts.append(f"udp_len={fr['udp.length']}")
        syn = as_int(fr["infiniband.aeth.syndrome"])
        if syn is not None:
            parts.append(aeth_text(syn))
            msn = as_int(fr["infiniband.aeth.msn"])
            if msn is not None:
                parts.append(f"msn={msn}")
        dl = as_int(fr["infiniband.reth.dmalen"])
        if dl is not None:
            parts.append(f"dmalen={dl}")
        for f, name in (("infiniband.atomiceth.swapdt", "swap_add"), ("infiniband.atomiceth.cmpdt", "compare"),
                        ("infiniband.atomicacketh.origremdt", "orig")):
            v = as_int(fr[f])
            if v is not None:
                parts.append(f"{name}=0x{v:016x}")
        if fr["infiniband.immdt"].strip():
            parts.append("imm=" + fr["infiniband.immdt"].strip().replace(":", ""))
        ieth = fr["infiniband.ieth"].split(",")[0].replace(":", "").strip()
        if ieth:
            # IETH (SEND_LAST/ONLY_WITH_INVALIDATE): the R_Key by the name the scenario gave it.
            parts.append("ieth=" + log.meta[sc].get("keys", {}).get(int(ieth, 16), "unnamed"))
        qkey = as_int(fr["infiniband.deth.q_key"])
        if qkey is not None:
            # DETH (UD): the Q_Key as sent, the source QP as the side it belongs to.
            src_qp = as_int(fr["infiniband.deth.srcqp"])
            own = log.meta[sc]["qpn_a" if sender == "A" else "qpn_b"]
            parts.append(f"qkey=0x{qkey:08x} src_qp={sender if src_qp == own else 'other'}")
        text = " ".join(parts)
        # Collapse retransmissions (see the module comment).
        if not is_resp:
            if rel <= st["max_req"][d]:
                stats[sc]["retransmitted"] += 1
                continue
            st["max_req"][d] = rel
        elif op == 17 and syn is not None and (syn >> 5) & 3 == 0:
            if rel <= st["max_ack"][d]:
                stats[sc]["duplicate_responses"] += 1
                continue
            st["max_ack"][d] = rel
        else:
            if text in st["seen_resp"][d]:
                stats[sc]["duplicate_responses"] += 1
                continue
            st["seen_resp"][d].add(text)
            if syn is not None and (syn >> 5) & 3 == 0:
                st["max_ack"][d] = max(st["max_ack"][d], rel)
        seqs[sc][d].append(text)
    if unassigned:
        notes.append(f"{unassigned} RoCEv2 frame(s) outside every scenario's PSN range")
    return seqs, stats, notes


def stats_line(counter):
    def b(n):
        return "0" if n == 0 else "some"
    return f"retransmitted={b(counter['retransmitted'])} duplicate_responses={b(counter['duplicate_responses'])}"


def cmd_normalise(args):
    log = Log(args.log)
    seqs, stats, notes = normalise(args.pcap, log)
    for sc in log.scenarios():
        if sc not in seqs:
            continue
        for d in DIRS:
            for l in seqs[sc][d]:
                print(f"pcap {sc} {d} {l}")
        print(f"pcap {sc} stats {stats_line(stats[sc])} "
              f"(counts: {stats[sc]['retransmitted']} {stats[sc]['duplicate_responses']})")
    for n in notes:
        print("# note: " + n)
    return 0


def cmd_pcap(args):
    sim_log, rxe_log = Log(args.sim_log), Log(args.rxe_log)
    entries = read_known(args.known)
    s_seqs, s_stats, s_notes = normalise(args.sim_pcap, sim_log)
    r_seqs, r_stats, r_notes = normalise(args.rxe_pcap, rxe_log)
    report = Report(f"captures: simulator ({args.sim_pcap}) vs rxe ({args.rxe_pcap}), mode {args.mode}")
    for n in s_notes:
        report.info.append("simulator capture: " + n)
    for n in r_notes:
        report.info.append("rxe capture: " + n)
    compared = set()
    for sc in sim_log.scenarios():
        if sc not in r_seqs:
            report.undocumented.append((f"pcap:{sc}", "(scenario only in the simulator run)", None))
            continue
        compared.add(sc)
        for d in DIRS:
            compare_seqs(s_seqs[sc][d], r_seqs[sc][d], "pcap", sc, d, entries, args.mode, report)
        report.info.append(f"{sc}: frames after collapsing: sim {sum(len(v) for v in s_seqs[sc].values())}, "
                           f"rxe {sum(len(v) for v in r_seqs[sc].values())}; collapsed retransmissions/duplicate "
                           f"responses: sim {s_stats[sc]['retransmitted']}/{s_stats[sc]['duplicate_responses']}, "
                           f"rxe {r_stats[sc]['retransmitted']}/{r_stats[sc]['duplicate_responses']}")
    if not any(s_seqs[sc][d] for sc in compared for d in DIRS):
        report.undocumented.append(("pcap", "(no RoCEv2 frames in the simulator capture)", None))
    if not any(r_seqs[sc][d] for sc in compared for d in DIRS):
        report.undocumented.append(("pcap", None, "(no RoCEv2 frames in the rxe capture)"))
    return report.print_and_status(entries, args.mode, compared, "pcap")


# ---- expectations (simulator self-check) ---------------------------------------------------------


def read_expected(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            l = raw.rstrip("\n").rstrip()
            if not l or l.lstrip().startswith("#"):
                continue
            out.append(l)
    return out


def cmd_expect(args):
    """Expected lines of each scenario (the specification's behaviour) against the simulator's.
    A difference matching a `sim-bug` entry of known_differences.txt (its rxe column is the
    conforming line) is reported as an open simulator bug; anything else fails."""
    log = Log(args.log)
    if not log.complete:
        return EXIT_FAIL
    entries = read_known(args.known)
    scen = args.scenario or log.scenarios()
    seqs = stats = None
    if args.pcap:
        seqs, stats, notes = normalise(args.pcap, log)
        for n in notes:
            print("# note: " + n)
    worst = EXIT_OK
    for sc in scen:
        path = os.path.join(args.expected, sc + ".txt")
        if not os.path.exists(path):
            print(f"== {sc}: no expectation file {path}: FAILED")
            worst = EXIT_FAIL
            continue
        want = collections.defaultdict(list)
        for l in read_expected(path):
            p = l.split(" ", 3)
            if p[0] == "pcap" and len(p) == 4:
                want[("pcap", p[2])].append(p[3])
            elif p[0] == sc and len(p) >= 3 and p[1] in SIDES:
                want[("log", p[1])].append(l.split(" ", 2)[2])
            else:
                fail_input(f"{path}: line not understood: {l}")
        got = collections.defaultdict(list)
        if sc in log.lines:
            for side in SIDES:
                got[("log", side)] = list(log.lines[sc][side])
        if seqs is not None:
            for d in DIRS:
                got[("pcap", d)] = list(seqs.get(sc, {}).get(d, []))
            got[("pcap", "stats")] = [stats_line(stats.get(sc, collections.Counter()))]
        else:
            for k in [k for k in want if k[0] == "pcap"]:
                del want[k]
        report = Report(f"{sc}: simulator vs the expected behaviour ({os.path.relpath(path, REPO)})")
        for k in sorted(set(want) | set(got)):
            # "rxe" here is the expectation: a sim-bug entry's rxe column is the conforming line.
            compare_seqs(got.get(k, []), want.get(k, []), k[0], sc, k[1], entries, None, report, rules=False,
                         classes={"sim-bug"})
        for e in entries:
            e.seen = 0  # no stale checks here: the self-check sees only sim-bug entries
        rc = EXIT_OK if not report.undocumented else EXIT_FAIL
        if rc == EXIT_OK and report.known:
            rc = EXIT_BUG
        print(f"== {sc}: {report.compared} line(s) compared with {os.path.relpath(path, REPO)}: "
              f"{ {EXIT_OK: 'OK', EXIT_FAIL: 'FAILED', EXIT_BUG: 'OPEN SIMULATOR BUG(S)'}[rc] }")
        for e, where, s_, r_ in report.known:
            print(f"   OPEN SIMULATOR BUG [{e.id}] {where}\n       expected:  {r_ if r_ is not None else '(absent)'}\n"
                  f"       simulator: {s_ if s_ is not None else '(absent)'}")
        for where, s_, r_ in report.undocumented:
            print(f"   DIFFERENCE {where}\n       expected:  {r_ if r_ is not None else '(absent)'}\n"
                  f"       simulator: {s_ if s_ is not None else '(absent)'}")
        if rc == EXIT_FAIL:
            worst = EXIT_FAIL
        elif rc == EXIT_BUG and worst == EXIT_OK:
            worst = EXIT_BUG
    return worst


# ---- known differences as Markdown ---------------------------------------------------------------

BEGIN = "<!-- known-differences: generated by tests/diff/diffcheck.py render-known; do not edit -->"
END = "<!-- /known-differences -->"


def md(s):
    return s.replace("|", "\\|")


def render(entries):
    out = [BEGIN, "", "| id | class | runs | where | simulator | rxe | why | source |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for e in entries:
        sim = "(absent)" if e.sim == "-" else f"`{md(e.sim)}`"
        rxe = "(absent)" if e.rxe == "-" else f"`{md(e.rxe)}`"
        out.append(f"| {e.id} | {e.cls} | {e.mode} | `{e.where}` | {sim} | {rxe} | {md(e.reason)} | {md(e.source)} |")
    out += ["", END]
    return "\n".join(out) + "\n"


def cmd_render(args):
    text = render(read_known(args.known))
    if args.check:
        try:
            with open(args.check, encoding="utf-8") as f:
                doc = f.read()
        except OSError as e:
            fail_input(f"cannot read {args.check}: {e}")
        if text not in doc:
            print(f"diffcheck: {args.check} does not contain the current table of {args.known}; regenerate it with\n"
                  f"  tests/diff/diffcheck.py render-known --update {args.check}")
            return 1
        print(f"{args.check}: the known-differences table is up to date")
        return 0
    if args.update:
        with open(args.update, encoding="utf-8") as f:
            doc = f.read()
        i, j = doc.find(BEGIN), doc.find(END)
        if i < 0 or j < 0:
            fail_input(f"{args.update}: no {BEGIN} ... {END} block")
        doc = doc[:i] + text.rstrip("\n") + doc[j + len(END):]
        with open(args.update, "w", encoding="utf-8") as f:
            f.write(doc)
        print(f"{args.update}: table updated")
        return 0
    sys.stdout.write(text)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("logs")
    p.add_argument("--sim", nargs="+", required=True)
    p.add_argument("--rxe", nargs="+", required=True)
    p.add_argument("--mode", choices=["local", "two"], default="local")
    p.add_argument("--known", default=DEFAULT_KNOWN)
    p = sub.add_parser("pcap")
    p.add_argument("--sim-pcap", required=True)
    p.add_argument("--sim-log", nargs="+", required=True)
    p.add_argument("--rxe-pcap", required=True)
    p.add_argument("--rxe-log", nargs="+", required=True)
    p.add_argument("--mode", choices=["local", "two"], default="two")
    p.add_argument("--known", default=DEFAULT_KNOWN)
    p = sub.add_parser("expect")
    p.add_argument("--log", nargs="+", required=True)
    p.add_argument("--pcap")
    p.add_argument("--expected", default=os.path.join(HERE, "expected"))
    p.add_argument("--scenario", nargs="*")
    p.add_argument("--known", default=DEFAULT_KNOWN)
    p = sub.add_parser("normalise")
    p.add_argument("--pcap", required=True)
    p.add_argument("--log", nargs="+", required=True)
    p = sub.add_parser("render-known")
    p.add_argument("--known", default=DEFAULT_KNOWN)
    p.add_argument("--check")
    p.add_argument("--update")
    args = ap.parse_args()
    return {"logs": cmd_logs, "pcap": cmd_pcap, "expect": cmd_expect, "normalise": cmd_normalise,
            "render-known": cmd_render}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
