// SPDX-License-Identifier: Apache-2.0
#include "step_mode.h"

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "drop_rule.h"
#include "hca.h"
#include "strprintf.h"

namespace hcasim::sim {

using model::kTraceNone;

// ------------------------------------------------------------------ host memory shadow

bool IommuShadow::read(uint64_t iova, void* dst, uint64_t len) const {
  auto it = map_.upper_bound(iova);
  if (it == map_.begin()) return false;
  --it;
  if (iova - it->first >= it->second.second || it->second.second - (iova - it->first) < len) return false;
  std::memcpy(dst, it->second.first + (iova - it->first), len);
  return true;
}

// ------------------------------------------------------------------ inspector

namespace {

/** One buffer (SQ, RQ, CQ) and its buffer table, entry by entry (at most @p max pages). */
std::string describe_buffer(const char* what, const hw::BufferDesc& d, const model::BufferCursor& c,
                            const IommuShadow* mem, uint32_t max = 16) {
  std::string s = model::strprintf("  %s: %u page(s) of %llu B, %u-level table, root at dma 0x%" PRIx64, what,
                                   d.npages, 1ull << d.log_page_size, unsigned(d.levels), d.bt_root);
  if (c.page != ~0ull)
    s += model::strprintf("; translation cache: page %" PRIu64 " -> 0x%" PRIx64 "\n", c.page, c.page_dma);
  else
    s += "; translation cache empty\n";
  const uint64_t per_leaf = (1ull << hw::kMinPageShift) / 8;
  for (uint32_t page = 0; page < d.npages && page < max; ++page) {
    uint64_t e = 0;
    if (d.levels == 1) {
      const uint64_t at = d.bt_root + uint64_t(page) * 8;
      if (!mem || !mem->read(at, &e, 8)) {
        s += model::strprintf("    page %u: L1[%u]@0x%" PRIx64 " not readable\n", page, page, at);
        continue;
      }
      s += model::strprintf("    page %u: L1[%u]@0x%" PRIx64 " -> page dma 0x%" PRIx64 "%s\n", page, page, at,
                            hw::bte_addr(e), hw::bte_valid(e) ? "" : " (invalid)");
    } else {
      const uint64_t root_at = d.bt_root + (page / per_leaf) * 8;
      uint64_t root = 0;
      if (!mem || !mem->read(root_at, &root, 8)) {
        s += model::strprintf("    page %u: L1[%" PRIu64 "]@0x%" PRIx64 " not readable\n", page,
                              page / per_leaf, root_at);
        continue;
      }
      const uint64_t leaf_at = hw::bte_addr(root) + (page % per_leaf) * 8;
      if (!hw::bte_valid(root) || !mem->read(leaf_at, &e, 8)) {
        s += model::strprintf("    page %u: L1[%" PRIu64 "]@0x%" PRIx64 " -> invalid root entry\n", page,
                              page / per_leaf, root_at);
        continue;
      }
      s += model::strprintf("    page %u: L1[%" PRIu64 "]@0x%" PRIx64 " -> leaf 0x%" PRIx64 " L2[%" PRIu64
                            "] -> page dma 0x%" PRIx64 "%s\n",
                            page, page / per_leaf, root_at, hw::bte_addr(root), page % per_leaf,
                            hw::bte_addr(e), hw::bte_valid(e) ? "" : " (invalid)");
    }
  }
  if (d.npages > max) s += model::strprintf("    ... %u more page(s)\n", d.npages - max);
  return s;
}

}  // namespace

std::string HcaInspector::qp(uint32_t host, uint32_t qpn) {
  if (host >= hcas_.size()) return "no such host\n";
  const model::Hca& h = *hcas_[host];
  const model::QpContext* q = h.core().qpc.peek(qpn);
  if (!q) return model::strprintf("%s has no QP 0x%x\n", h.identity().name.c_str(), qpn);
  const hw::Qpc& c = q->qpc;
  std::string s = model::strprintf(
      "QP 0x%06x on %s: %s %s, dest QP 0x%06x, path MTU %u, PD %u, send CQ %u, recv CQ %u, QPC %s\n", c.qpn,
      h.identity().name.c_str(), hw::qp_type_name(hw::QpType(c.type)),
      hw::qp_state_name(hw::QpState(c.state)), c.dest_qpn, 1u << c.path_mtu_log, c.pdn, c.send_cqn,
      c.recv_cqn, h.core().qpc.is_cached(qpn) ? "cached" : "not cached");
  if (hw::is_datagram(hw::QpType(c.type))) s += model::strprintf("  Q_Key 0x%08x\n", c.qkey);
  const uint32_t sq_size = 1u << c.sq_log_size, rq_size = 1u << c.rq_log_size;
  s += model::strprintf(
      "  SQ: %u WQEBBs; producer (last doorbell) %u, next fetch %u (slot %u), fetched %zu, in flight %zu; "
      "next PSN %u; tx cursor message %zu packet %u; RNR retries left %u\n",
      sq_size, q->sq_pi, q->sq_fetch, q->sq_fetch & (sq_size - 1), q->fetched.size(), q->inflight.size(),
      q->next_psn, q->tx_msg, q->tx_pkt, unsigned(q->rnr_left));
  if (!q->inflight.empty()) {
    s += "      in flight:";
    for (size_t i = 0; i < q->inflight.size(); ++i) {
      if (i == 8) {
        s += " ...";
        break;
      }
      const model::InflightMsg& m = q->inflight[i];
      s += model::strprintf(" [WQE %u PSN %u+%u%s]", m.w.index, m.first_psn, m.npkts, m.sent ? " sent" : "");
    }
    s += "\n";
  }
  if (c.srqn != hw::kNoSrq)
    s += model::strprintf(
        "  RQ: none, receives from SRQ 0x%x (p srq 0x%x); expected PSN %u, MSN %u%s\n", c.srqn, c.srqn,
        q->epsn, q->msn,
        q->recv.active
            ? model::strprintf(", filling SRQ WQE %u (%u B placed)", q->recv.index, q->recv.offset).c_str()
            : "");
  else
    s += model::strprintf(
        "  RQ: %u WQEs of %u B; consumer %u (slot %u), producer seen %u; expected PSN %u, MSN %u%s\n",
        rq_size, 1u << c.rq_log_stride, q->rq_ci, q->rq_ci & (rq_size - 1), q->rq_pi_seen, q->epsn, q->msn,
        q->recv.active
            ? model::strprintf(", filling RQ WQE %u (%u B placed)", q->recv.index, q->recv.offset).c_str()
            : "");
  s += model::strprintf(
      "  timeout %u, retry_cnt %u, rnr_retry %u, min_rnr_timer %u, max_rd_atomic %u, max_dest_rd_atomic %u, "
      "access 0x%x, doorbell record at dma 0x%" PRIx64 "\n",
      c.timeout, c.retry_cnt, c.rnr_retry, c.min_rnr_timer, c.max_rd_atomic, c.max_dest_rd_atomic,
      c.access_flags, c.dbrec_addr);
  return s;
}

std::string HcaInspector::bt(uint32_t host, uint32_t qpn) {
  if (host >= hcas_.size()) return "no such host\n";
  const model::Hca& h = *hcas_[host];
  const model::QpContext* q = h.core().qpc.peek(qpn);
  if (!q) return model::strprintf("%s has no QP 0x%x\n", h.identity().name.c_str(), qpn);
  const IommuShadow* mem = host < mem_.size() ? mem_[host] : nullptr;
  std::string s = model::strprintf("QP 0x%06x on %s buffer tables:\n", qpn, h.identity().name.c_str());
  s += describe_buffer("SQ", q->qpc.sq_buf, q->sq_cursor, mem);
  s += describe_buffer("RQ", q->qpc.rq_buf, q->rq_cursor, mem);
  return s;
}

std::string HcaInspector::cq(uint32_t host, uint32_t cqn) {
  if (host >= hcas_.size()) return "no such host\n";
  const model::Hca& h = *hcas_[host];
  model::CqUnit::CqView v;
  if (!h.core().cq.peek(cqn, v)) return model::strprintf("%s has no CQ %u\n", h.identity().name.c_str(), cqn);
  const uint32_t size = 1u << v.cqc.log_size;
  std::string s = model::strprintf(
      "CQ %u on %s: %u CQEs, EQ %u; producer %u (next slot %u, owner bit %u), consumer seen %u; %s%s\n", cqn,
      h.identity().name.c_str(), size, v.cqc.eqn, v.pi, v.pi & (size - 1), (v.pi >> v.cqc.log_size) & 1,
      v.ci_seen,
      !v.armed           ? "disarmed"
      : v.solicited_only ? "armed solicited-only"
                         : "armed next",
      v.overflowed ? ", OVERFLOWED" : "");
  const IommuShadow* mem = host < mem_.size() ? mem_[host] : nullptr;
  s += describe_buffer("ring", v.cqc.buf, v.cursor, mem, 4);
  return s;
}

std::string HcaInspector::srq(uint32_t host, uint32_t srqn) {
  if (host >= hcas_.size()) return "no such host\n";
  const model::Hca& h = *hcas_[host];
  const model::SrqContext* q = h.core().srqs.peek(srqn);
  if (!q) return model::strprintf("%s has no SRQ 0x%x\n", h.identity().name.c_str(), srqn);
  const hw::Srqc& c = q->srqc;
  const uint32_t size = 1u << c.log_size;
  std::string s = model::strprintf(
      "SRQ 0x%x on %s: %u WQEs of %u B, PD %u%s; consumer %u (slot %u), producer seen %u; limit %s\n", srqn,
      h.identity().name.c_str(), size, 1u << c.log_stride, c.pdn,
      c.xrcdn ? model::strprintf(", XRC domain %u, completions to CQ %u", c.xrcdn, c.cqn).c_str() : "", q->ci,
      q->ci & (size - 1), q->pi_seen,
      c.limit ? model::strprintf("armed at %u", c.limit).c_str() : "not armed");
  const IommuShadow* mem = host < mem_.size() ? mem_[host] : nullptr;
  s += describe_buffer("ring", c.buf, q->cursor, mem, 4);
  return s;
}

std::string HcaInspector::eq(uint32_t host, uint32_t eqn) {
  if (host >= hcas_.size()) return "no such host\n";
  const model::Hca& h = *hcas_[host];
  model::EqUnit::EqView v;
  if (!h.core().eq.peek(eqn, v)) return model::strprintf("%s has no EQ %u\n", h.identity().name.c_str(), eqn);
  const uint32_t size = 1u << v.eqc.log_size;
  std::string s = model::strprintf(
      "EQ %u on %s: %u EQEs, MSI-X vector %u; producer %u (next slot %u, owner bit %u), consumer (last arm) "
      "%u; %s\n",
      eqn, h.identity().name.c_str(), size, v.eqc.irq_vector, v.pi, v.pi & (size - 1),
      (v.pi >> v.eqc.log_size) & 1, v.ci,
      v.armed ? "armed: the next EQE interrupts" : "not armed: EQEs are written without an interrupt");
  s += describe_buffer("ring", v.eqc.buf, v.cursor, host < mem_.size() ? mem_[host] : nullptr, 4);
  return s;
}

std::string HcaInspector::mr(uint32_t host, uint32_t key) {
  if (host >= hcas_.size()) return "no such host\n";
  const model::Hca& h = *hcas_[host];
  auto access = [](uint32_t a) {
    std::string s = "LOCAL_READ";
    if (a & hw::kAccessLocalWrite) s += "|LOCAL_WRITE";
    if (a & hw::kAccessRemoteWrite) s += "|REMOTE_WRITE";
    if (a & hw::kAccessRemoteRead) s += "|REMOTE_READ";
    if (a & hw::kAccessRemoteAtomic) s += "|REMOTE_ATOMIC";
    if (a & hw::kAccessMwBind) s += "|MW_BIND";
    return s;
  };
  if (const model::MrEntry* m = h.core().mrs.find(key)) {
    const hw::MkeyCtx& c = m->ctx;
    std::string s = model::strprintf(
        "MR key 0x%x on %s: PD %u, va 0x%" PRIx64 "..0x%" PRIx64 " (%" PRIu64 " bytes), access %s\n", key,
        h.identity().name.c_str(), c.pdn, c.start, c.start + c.length, c.length, access(c.access).c_str());
    return s + describe_buffer("pages", c.pages, m->cursor, host < mem_.size() ? mem_[host] : nullptr, 4);
  }
  const model::MwEntry* w = h.core().mrs.find_window(key);
  if (!w)
    return model::strprintf("%s has no memory region or window with key 0x%x\n", h.identity().name.c_str(),
                            key);
  if (!w->bound)
    return model::strprintf("MW type %u key index 0x%x on %s: PD %u, not bound\n", w->type,
                            hw::key_index(key), h.identity().name.c_str(), w->pdn);
  return model::strprintf(
      "MW type %u key index 0x%x on %s: PD %u, bound with tag 0x%02x%s to MR 0x%x, va 0x%" PRIx64 " (%" PRIu64
      " bytes%s), access %s%s\n",
      w->type, hw::key_index(key), h.identity().name.c_str(), w->pdn, w->tag,
      (key & 0xff) == w->tag ? "" : " (not this key's tag)", w->mr_key, w->start, w->length,
      w->zero_based ? ", zero-based" : "", access(w->access).c_str(),
      w->type == 2 ? model::strprintf(", QP 0x%x", w->qpn).c_str() : "");
}

// ------------------------------------------------------------------ controller

const char* StepController::help_text() {
  return "step commands:\n"
         "  s | step | <enter>     run to the next pausing event\n"
         "  c [N] | continue [N]   run N pausing events (default 1)\n"
         "  n WHAT | next WHAT     run to the next event of a kind (ignores the step filter): cqe, pkt,\n"
         "                         doorbell, irq, eqe, event, arm, any event name, or a filter spec\n"
         "  p qp QPN [HOST]        QP context and SQ/RQ producer/consumer indices\n"
         "  p bt QPN [HOST]        buffer tables of the QP's SQ and RQ\n"
         "  p cq CQN [HOST]        CQ arm state and indices\n"
         "  p srq SRQN [HOST]      shared receive queue: indices, armed limit, ring\n"
         "  p eq EQN [HOST]        event queue: indices, arm state, ring\n"
         "  p mr KEY [HOST]        memory region or window: PD, range, access, pages\n"
         "  x wqe QPN IDX [HOST]   send WQE at WQEBB counter IDX: bytes and fields (x rwqe: receive WQE)\n"
         "  x cqe CQN IDX [HOST]   CQE number IDX: bytes, fields, owner bit (x eqe EQN IDX: an EQE)\n"
         "  p stats                counters of every device\n"
         "  drop next [HOST]       the wire loses the next frame HOST receives (default: any host)\n"
         "  q | quit               stop pausing and run to completion\n"
         "  h | help               this list\n"
         "HOST: index or device name (default: the QPN's own host for QP commands, else the current "
         "event's)\n";
}

StepController::StepController(FILE* in, bool own_in, FILE* out, bool echo,
                               std::vector<std::string> host_names, ModelInspector* inspector)
    : in_(in), own_in_(own_in), out_(out), echo_(echo), names_(std::move(host_names)), insp_(inspector) {
  if (!in_) active_ = false;
}

StepController::~StepController() { finish(); }

void StepController::finish() {
  if (done_) return;
  done_ = true;
  active_ = false;
  if (own_in_ && in_) std::fclose(in_);
  in_ = nullptr;
  std::fflush(out_);
}

void StepController::record(const model::TraceEvent& ev) {
  if (!active_ || done_) return;
  if (until_) {
    if (!until_filter_.keep(ev)) return;
    until_ = false;
  } else {
    if (!filter.keep(ev)) return;
    if (skip_ > 0) {
      --skip_;
      return;
    }
  }
  pause(ev);
}

void StepController::pause(const model::TraceEvent& ev) {
  ++pauses_;
  const std::string line = format_trace_line(ev, names_);
  std::fputs(line.c_str(), out_);
  for (;;) {
    std::fputs("(step) ", out_);
    std::fflush(out_);
    char buf[512];
    if (!std::fgets(buf, sizeof buf, in_)) {
      std::fputs("\nstep: end of commands: running to completion\n", out_);
      std::fflush(out_);
      active_ = false;
      return;
    }
    std::string cmd = buf;
    while (!cmd.empty() && (cmd.back() == '\n' || cmd.back() == '\r')) cmd.pop_back();
    if (echo_) {
      std::fputs(cmd.c_str(), out_);
      std::fputc('\n', out_);
    }
    if (execute(cmd, ev)) {
      std::fflush(out_);
      return;
    }
  }
}

uint32_t StepController::default_host(bool is_qpn, uint32_t number, uint32_t current) const {
  const uint32_t owner = (number >> 16) & 0xff;  // QPNs carry their host's index (CommandUnit::qpn_base)
  return is_qpn && owner < names_.size() ? owner : current;
}

bool StepController::host_arg(const std::vector<std::string>& w, size_t i, uint32_t cur, uint32_t& host) {
  host = cur;
  if (i >= w.size()) return true;
  for (size_t k = 0; k < names_.size(); ++k)
    if (w[i] == names_[k]) {
      host = uint32_t(k);
      return true;
    }
  char* end = nullptr;
  unsigned long v = std::strtoul(w[i].c_str(), &end, 0);
  if (*end || v >= names_.size()) {
    std::fprintf(out_, "step: no host '%s'\n", w[i].c_str());
    return false;
  }
  host = uint32_t(v);
  return true;
}

bool StepController::execute(const std::string& line, const model::TraceEvent& ev) {
  std::vector<std::string> w;
  {
    std::istringstream ss(line);
    std::string x;
    while (ss >> x) w.push_back(x);
  }
  if (w.empty() || w[0] == "s" || w[0] == "step") {
    skip_ = 0;
    return true;
  }
  const std::string& c = w[0];
  if (c == "c" || c == "continue") return cmd_continue(w);
  if (c == "n" || c == "next") return cmd_next(w);
  if (c == "q" || c == "quit") {
    active_ = false;
    std::fputs("step: no more pauses\n", out_);
    return true;
  }
  if (c == "h" || c == "help" || c == "?") {
    std::fputs(help_text(), out_);
    return false;
  }
  if (c == "p" || c == "print") return cmd_print(w, ev);
  if (c == "drop") return cmd_drop(w);
  if (c == "x") return cmd_examine(w, ev);
  std::fprintf(out_, "step: unknown command '%s' (h for help)\n", c.c_str());
  return false;
}

bool StepController::cmd_continue(const std::vector<std::string>& w) {
  uint64_t n = 1;
  if (w.size() > 1) {
    char* end = nullptr;
    n = std::strtoull(w[1].c_str(), &end, 0);
    if (*end || n == 0) {
      std::fprintf(out_, "step: continue takes a positive count, not '%s'\n", w[1].c_str());
      return false;
    }
  }
  skip_ = n - 1;
  return true;
}

bool StepController::cmd_next(const std::vector<std::string>& w) {
  if (w.size() < 2) {
    std::fputs("step: next what? (cqe, pkt, doorbell, irq, eqe, event, arm, an event name or a filter)\n",
               out_);
    return false;
  }
  // The filter's vocabulary: a kind name or short word (cqe, pkt, ...), or a whole filter.
  const std::string spec = w[1].find('=') != std::string::npos ? w[1] : "kind=" + w[1];
  TraceFilter f;
  std::string err;
  if (!f.parse(spec, err, names_)) {
    std::fprintf(out_, "step: %s\n", err.c_str());
    return false;
  }
  until_filter_ = f;
  until_ = true;
  skip_ = 0;
  return true;
}

bool StepController::cmd_examine(const std::vector<std::string>& w, const model::TraceEvent& ev) {
  if (w.size() < 4 || (w[1] != "wqe" && w[1] != "rwqe" && w[1] != "cqe" && w[1] != "eqe")) {
    std::fputs("step: x wqe|rwqe QPN IDX [HOST] | x cqe CQN IDX [HOST] | x eqe EQN IDX [HOST]\n", out_);
    return false;
  }
  char *e1 = nullptr, *e2 = nullptr;
  const unsigned long q = std::strtoul(w[2].c_str(), &e1, 0), idx = std::strtoul(w[3].c_str(), &e2, 0);
  if (*e1 || *e2) {
    std::fprintf(out_, "step: '%s %s' are not numbers\n", w[2].c_str(), w[3].c_str());
    return false;
  }
  uint32_t host;
  if (!host_arg(w, 4, default_host(w[1] == "wqe" || w[1] == "rwqe", uint32_t(q), ev.host), host))
    return false;
  std::fputs(
      insp_ ? insp_->raw(host, w[1], uint32_t(q), uint32_t(idx)).c_str() : "step: no model to inspect\n",
      out_);
  return false;
}

bool StepController::cmd_drop(const std::vector<std::string>& w) {
  if (w.size() < 2 || w[1] != "next" || w.size() > 3) {
    std::fputs("step: drop next [HOST]\n", out_);
    return false;
  }
  uint32_t host = DropRule::kAny;
  if (w.size() == 3 && !host_arg(w, 2, 0, host)) return false;
  if (!on_drop_next) {
    std::fputs("step: this run cannot lose frames\n", out_);
    return false;
  }
  on_drop_next(host);
  if (host == DropRule::kAny)
    std::fputs("step: the next frame any host receives will be lost\n", out_);
  else
    std::fprintf(out_, "step: the next frame %s receives will be lost\n", names_[host].c_str());
  return false;
}

bool StepController::cmd_print(const std::vector<std::string>& w, const model::TraceEvent& ev) {
  if (w.size() >= 2 && w[1] == "stats") {
    std::fputs(insp_ ? insp_->stats().c_str() : "step: no model to inspect\n", out_);
    return false;
  }
  if (w.size() < 3 ||
      (w[1] != "qp" && w[1] != "bt" && w[1] != "cq" && w[1] != "srq" && w[1] != "eq" && w[1] != "mr")) {
    std::fputs("step: p qp QPN | p bt QPN | p cq CQN | p srq SRQN | p eq EQN | p mr KEY [HOST] | p stats\n",
               out_);
    return false;
  }
  char* end = nullptr;
  const unsigned long n = std::strtoul(w[2].c_str(), &end, 0);
  if (*end) {
    std::fprintf(out_, "step: '%s' is not a number\n", w[2].c_str());
    return false;
  }
  uint32_t host;
  if (!host_arg(w, 3, default_host(w[1] == "qp" || w[1] == "bt", uint32_t(n), ev.host), host)) return false;
  if (!insp_) {
    std::fputs("step: no model to inspect\n", out_);
    return false;
  }
  const std::string r = w[1] == "qp"    ? insp_->qp(host, uint32_t(n))
                        : w[1] == "bt"  ? insp_->bt(host, uint32_t(n))
                        : w[1] == "srq" ? insp_->srq(host, uint32_t(n))
                        : w[1] == "eq"  ? insp_->eq(host, uint32_t(n))
                        : w[1] == "mr"  ? insp_->mr(host, uint32_t(n))
                                        : insp_->cq(host, uint32_t(n));
  std::fputs(r.c_str(), out_);
  return false;
}

}  // namespace hcasim::sim
