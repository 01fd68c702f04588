// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/pair.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <thread>

#include "hcasim/verbs/device.h"
#include "hcasim/verbs/error.h"

namespace hcasim::verbs {
namespace {

// wr_id: kind in the top byte, a value below it.
enum Kind : uint8_t { kRecv = 1, kSendCtl = 2, kAckWr = 3, kWrite = 4, kProbe = 5 };
// Send queue entries and CQEs beyond FlowControl's: the one liveness probe a pair may have out.
constexpr uint32_t kProbeWrs = 1;
constexpr uint64_t kValueMask = (uint64_t(1) << 56) - 1;
uint64_t wrId(Kind k, uint64_t v) { return (uint64_t(k) << 56) | (v & kValueMask); }
Kind kindOf(uint64_t id) { return Kind(id >> 56); }
uint64_t valueOf(uint64_t id) { return id & kValueMask; }
/** CPU time the calling thread has used, in ns. */
uint64_t threadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec);
}
/** Whether a busy-poll round that began at @p wall0, with the thread's CPU time at @p cpu0, ran
 *  on the CPU for at least half of it (it spun, rather than blocked or waited for a core). */
bool spunOnCpu(uint64_t cpu0, std::chrono::steady_clock::time_point wall0) {
  const uint64_t wall = uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - wall0).count());
  return 2 * (threadCpuNs() - cpu0) >= wall;
}
const char* kindName(uint64_t id) {
  switch (kindOf(id)) {
    case kRecv: return "receive";
    case kSendCtl: return "message/grant send";
    case kAckWr: return "ack send";
    case kWrite: return "RDMA write";
    case kProbe: return "liveness probe";
  }
  return "unknown";
}

// FlowControl cookies: what a queued data item is.
constexpr uint64_t kCookieControl = uint64_t(1) << 56;
constexpr uint64_t kCookieWrite = uint64_t(2) << 56;

// Header of every SEND with a payload (messages and grants), big-endian:
//   u8 magic 0xA7, u8 version 1, u8 type (1 message, 2 grant, 3 abort), u8 flags 0, u32 tag or slot
// An abort's body is the sender's error text (UTF-8, not terminated; tag 0).
constexpr uint8_t kMagic = 0xA7, kVersion = 1, kTypeMessage = 1, kTypeGrant = 2, kTypeAbort = 3;
constexpr size_t kHeader = 8;
// Grant body: u32 count, u32 rkey, u64 addr, u64 length.
constexpr size_t kGrantBody = 24;

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (24 - 8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (56 - 8 * i));
}
uint32_t get32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}
uint64_t get64(const uint8_t* p) { return (uint64_t(get32(p)) << 32) | get32(p + 4); }

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

uint32_t randomPsn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

}  // namespace

// ---- construction ------------------------------------------------------------------------

Pair::Pair(std::shared_ptr<Device> dev, const PairOptions& opts, std::string label)
    : dev_(std::move(dev)),
      opts_(opts),
      label_(label.empty() ? "pair" : std::move(label)),
      fc_(FlowControl::Config{opts.dataWr, opts.ackWr}) {
  if (opts_.maxWriteBytes == 0 || opts_.maxWriteBytes > (size_t(1) << 31))
    throw std::invalid_argument(label_ + ": maxWriteBytes must be 1 .. 2^31");
  if (opts_.probeInterval.count() < 0)
    throw std::invalid_argument(label_ + ": probeInterval must be >= 0 ms (0: no liveness probes)");
  event_ = dev_->mode() == PollMode::Event;
  slotBytes_ = kHeader + std::max<size_t>(opts_.maxMessageBytes, kGrantBody);
  const uint32_t sq = fc_.sendQueueDepth() + kProbeWrs, rq = fc_.recvQueueDepth();
  const uint32_t cqe = fc_.completionQueueDepth() + kProbeWrs;
  const ibv_device_attr& da = dev_->attr();
  if (int(sq) > da.max_qp_wr || int(rq) > da.max_qp_wr || int(cqe) > da.max_cqe)
    throw std::invalid_argument(label_ + ": queues of " + std::to_string(sq) + "/" + std::to_string(rq) +
                                " WRs and " + std::to_string(cqe) + " CQEs exceed " + dev_->name() +
                                " (max_qp_wr " + std::to_string(da.max_qp_wr) + ", max_cqe " +
                                std::to_string(da.max_cqe) + ")");
  try {
    cq_ = ibv_create_cq(dev_->context(), int(cqe), this, event_ ? dev_->channel() : nullptr, 0);
    if (!cq_) throwSystemError(label_ + ": ibv_create_cq(" + std::to_string(cqe) + ")", errno);
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;  // every WR asks for its completion explicitly
    ia.cap.max_send_wr = sq;
    ia.cap.max_recv_wr = rq;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = opts_.maxInlineData;
    // Devices differ in how much inline data a WQE holds (the simulator 172 bytes, rxe 256,
    // some none at all) and ibv_device_attr does not say: ask for less until one is accepted.
    const ibv_qp_init_attr want = ia;
    const uint32_t inlineTries[] = {opts_.maxInlineData, std::min<uint32_t>(opts_.maxInlineData, 64), 0};
    for (size_t i = 0; i < 3 && !qp_; ++i) {
      if (i > 0 && inlineTries[i] == inlineTries[i - 1]) continue;
      ia = want;
      ia.cap.max_inline_data = inlineTries[i];
      qp_ = ibv_create_qp(dev_->pd(), &ia);
    }
    if (!qp_)
      throwSystemError(label_ + ": ibv_create_qp(RC, " + std::to_string(sq) + "/" + std::to_string(rq) + ")",
                       errno);
    maxInline_ = ia.cap.max_inline_data;

    recvStaging_.assign(size_t(rq) * slotBytes_, 0);
    sendStaging_.assign(size_t(opts_.dataWr) * slotBytes_, 0);
    recvMr_ = ibv_reg_mr(dev_->pd(), recvStaging_.data(), recvStaging_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!recvMr_) throwSystemError(label_ + ": ibv_reg_mr(receive staging)", errno);
    sendMr_ = ibv_reg_mr(dev_->pd(), sendStaging_.data(), sendStaging_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!sendMr_) throwSystemError(label_ + ": ibv_reg_mr(send staging)", errno);
    for (uint32_t i = opts_.dataWr; i-- > 0;) freeSendStaging_.push_back(i);

    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = dev_->port();
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      throwSystemError(label_ + ": ibv_modify_qp(RESET -> INIT)", rc);

    // Every receive is posted before connecting: whatever the peer sends finds one.
    {
      std::lock_guard<std::mutex> g(mu_);
      for (uint32_t i = 0; i < rq; ++i) postRecv(i);
    }

    self_.lid = dev_->lid();
    self_.qpn = qp_->qp_num;
    self_.psn = opts_.psn >= 0 ? uint32_t(opts_.psn) & 0xffffff : randomPsn();
    std::memcpy(self_.gid.data(), dev_->gid().raw, 16);
    self_.mtu = uint8_t(dev_->activeMtu());
    self_.global = dev_->ethernet();

    if (event_) {
      armedNext_ = !opts_.solicited;
      std::lock_guard<std::mutex> arm(dev_->armMu_);
      if (int rc = ibv_req_notify_cq(cq_, armedNext_ ? 0 : 1))
        throwSystemError(label_ + ": ibv_req_notify_cq", rc);
    }
  } catch (...) {
    if (qp_) ibv_destroy_qp(qp_);
    if (recvMr_) ibv_dereg_mr(recvMr_);
    if (sendMr_) ibv_dereg_mr(sendMr_);
    if (cq_) ibv_destroy_cq(cq_);
    throw;
  }
  dev_->attach(this);
}

Pair::~Pair() {
  if (group_) group_->leave(this);
  // Sends are asynchronous: give queued and in-flight work a chance to finish first.
  if (connected_) {
    try {
      drain();
    } catch (...) {
    }
    settleAcks(std::chrono::milliseconds(20));
  }
  // Under the device's pair lock: the loop thread cannot be dispatching an event to us, and
  // once our CQ is gone no event for it can be fetched.
  std::lock_guard<std::recursive_mutex> g(dev_->pairsMu_);
  dev_->detach(this);
  if (eventsUnacked_) ibv_ack_cq_events(cq_, eventsUnacked_);
  // What arrived after the close handshake (a peer's last credit ack) is of no use now; polled,
  // it is not left in a CQ about to be destroyed.
  ibv_wc wc[16];
  while (ibv_poll_cq(cq_, 16, wc) > 0) {
  }
  ibv_destroy_qp(qp_);
  ibv_dereg_mr(recvMr_);
  ibv_dereg_mr(sendMr_);
  ibv_destroy_cq(cq_);
}

void Pair::connect(const Address& peer) {
  if (dev_->ethernet() && !peer.global)
    throw AddressError("flags", label_ + ": peer address has no GID (global flag clear) but " + dev_->name() +
                                    " is RoCE: every packet needs a GRH");
  const bool global = dev_->ethernet() || peer.global;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ibv_mtu(std::min<int>(int(dev_->activeMtu()), peer.mtu));
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = 1;
  a.ah_attr.dlid = peer.lid;
  a.ah_attr.sl = 0;
  a.ah_attr.src_path_bits = 0;
  a.ah_attr.port_num = dev_->port();
  a.ah_attr.is_global = global ? 1 : 0;
  if (global) {
    std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid.data(), 16);
    a.ah_attr.grh.sgid_index = uint8_t(dev_->gidIndex());
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = 0;
    a.ah_attr.grh.flow_label = 0;
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.sq_psn = self_.psn;
  r.max_rd_atomic = 1;
  std::unique_lock<std::mutex> lk(mu_);
  toRts(a,
        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC,
        r, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, peer);
}

void Pair::connect(const ibv_qp_attr& rtr, int rtrMask, const ibv_qp_attr& rts, int rtsMask) {
  if (!(rtrMask & IBV_QP_DEST_QPN) || !(rtrMask & IBV_QP_AV) || !(rtsMask & IBV_QP_SQ_PSN))
    throw std::invalid_argument(label_ +
                                ": connect(attributes): the RTR attributes need a destination QP and "
                                "an address vector, the RTS ones a send PSN");
  Address peer;
  peer.qpn = rtr.dest_qp_num;
  peer.psn = rtr.rq_psn;
  peer.lid = rtr.ah_attr.dlid;
  peer.global = rtr.ah_attr.is_global != 0;
  if (peer.global) std::memcpy(peer.gid.data(), rtr.ah_attr.grh.dgid.raw, 16);
  peer.mtu = uint8_t(rtr.path_mtu);
  std::unique_lock<std::mutex> lk(mu_);
  if (connected_) throw std::logic_error(label_ + ": already connected");
  self_.psn = rts.sq_psn;  // the CM chose it and told the peer: errors must show this one
  toRts(rtr, rtrMask, rts, rtsMask, peer);
}

void Pair::toRts(ibv_qp_attr rtr, int rtrMask, ibv_qp_attr rts, int rtsMask, const Address& peer) {
  if (connected_) throw std::logic_error(label_ + ": already connected");
  rtr.qp_state = IBV_QPS_RTR;
  rts.qp_state = IBV_QPS_RTS;
  // Our retry budget and timers, whoever computed the path: they decide how fast a broken
  // link fails the pair (and through PairGroup the collective).
  rtr.min_rnr_timer = opts_.minRnrTimer;
  rts.timeout = opts_.qpTimeout;
  rts.retry_cnt = opts_.retryCnt;
  rts.rnr_retry = opts_.rnrRetry;
  if (int rc = ibv_modify_qp(qp_, &rtr, rtrMask | IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER))
    throwSystemError(label_ + ": ibv_modify_qp(INIT -> RTR) towards " + peer.str(), rc);
  if (int rc = ibv_modify_qp(qp_, &rts,
                             rtsMask | IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY))
    throwSystemError(label_ + ": ibv_modify_qp(RTR -> RTS)", rc);
  peer_ = peer;
  connected_ = true;
  afterChange();  // anything queued before connecting goes now
  throwIfFailed();
}

// ---- posting (mu_ held) ------------------------------------------------------------------

void Pair::postRecv(uint32_t idx) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(recvStaging_.data() + size_t(idx) * slotBytes_),
              uint32_t(slotBytes_), recvMr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wrId(kRecv, idx);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad)) throwSystemError(label_ + ": ibv_post_recv", rc);
}

void Pair::postAck(uint32_t imm) {
  ibv_send_wr wr{};
  wr.wr_id = wrId(kAckWr, imm);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.num_sge = 0;
  wr.imm_data = htonl(imm);
  wr.send_flags = IBV_SEND_SIGNALED;  // not solicited: nobody sleeps for credits unless armed for any
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad)) throwSystemError(label_ + ": ibv_post_send(ack)", rc);
  ++stats_.acksSent;
}

void Pair::postItem(uint64_t cookie, uint32_t index, uint32_t wrs) {
  const uint64_t id = cookie & kValueMask;
  ibv_send_wr wr{};
  ibv_sge sge{};
  ibv_send_wr* bad = nullptr;
  const unsigned se = opts_.solicited ? IBV_SEND_SOLICITED : 0;
  if ((cookie & ~kValueMask) == kCookieControl) {
    auto it = controls_.find(id);
    if (it == controls_.end() || freeSendStaging_.empty())
      throw ProtocolError(label_ + ": internal: control item lost");
    const std::vector<uint8_t>& bytes = it->second;
    const uint32_t st = freeSendStaging_.back();
    uint8_t* p = sendStaging_.data() + size_t(st) * slotBytes_;
    std::memcpy(p, bytes.data(), bytes.size());
    sge = {reinterpret_cast<uintptr_t>(p), uint32_t(bytes.size()), sendMr_->lkey};
    wr.wr_id = wrId(kSendCtl, st);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const bool grant = bytes[2] == kTypeGrant;
    wr.opcode = grant ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    if (grant) wr.imm_data = htonl(get32(bytes.data() + 4));
    wr.send_flags = IBV_SEND_SIGNALED | se | (bytes.size() <= maxInline_ ? IBV_SEND_INLINE : 0);
    if (int rc = ibv_post_send(qp_, &wr, &bad)) throwSystemError(label_ + ": ibv_post_send(SEND)", rc);
    freeSendStaging_.pop_back();
    if (grant)
      ++stats_.grantsSent;
    else
      ++stats_.messagesSent;
    controls_.erase(it);
    return;
  }
  auto it = writes_.find(id);
  if (it == writes_.end()) throw ProtocolError(label_ + ": internal: write lost");
  const WriteOp& op = it->second;
  const bool last = index + 1 == wrs;
  const size_t off = size_t(index) * opts_.maxWriteBytes;
  const size_t len = last ? op.length - off : opts_.maxWriteBytes;
  sge = {op.laddr + off, uint32_t(len), op.lkey};
  wr.wr_id = wrId(kWrite, id);
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (last) wr.imm_data = htonl(op.slot);
  wr.wr.rdma.remote_addr = op.raddr + off;
  wr.wr.rdma.rkey = op.rkey;
  // Small writes go inline: the HCA takes the bytes from the WQE instead of reading them by
  // DMA, one PCIe round trip less on the latency path of small collectives.
  wr.send_flags = IBV_SEND_SIGNALED | (last ? se : 0) | (len && len <= maxInline_ ? IBV_SEND_INLINE : 0);
  if (int rc = ibv_post_send(qp_, &wr, &bad))
    throwSystemError(label_ + ": ibv_post_send(" + (last ? "RDMA_WRITE_WITH_IMM" : "RDMA_WRITE") + ")", rc);
  ++stats_.writeWrsPosted;
}

void Pair::enqueueControl(uint8_t type, uint32_t tagOrSlot, const void* body, size_t len) {
  std::vector<uint8_t> b(kHeader + len);
  b[0] = kMagic;
  b[1] = kVersion;
  b[2] = type;
  b[3] = 0;
  put32(&b[4], tagOrSlot);
  if (len) std::memcpy(&b[kHeader], body, len);
  const uint64_t id = nextId_++;
  controls_.emplace(id, std::move(b));
  fc_.enqueue(kCookieControl | id, 1);
  stats_.maxQueued = std::max<uint64_t>(stats_.maxQueued, fc_.queued());
}

void Pair::matchWrites(uint32_t slot) {
  SendSlot& s = sendSlots_[slot];
  while (!s.waiting.empty() && !s.grants.empty()) {
    Grant g = s.grants.front();
    if (--s.grants.front().count == 0) s.grants.pop_front();
    WriteOp op = s.waiting.front();
    s.waiting.pop_front();
    --writesWithoutGrant_;
    if (op.roffset > g.length || op.length > g.length - op.roffset) {
      if (s.error.empty())
        s.error = label_ + ": send on slot " + std::to_string(slot) + " of " + std::to_string(op.length) +
                  " bytes at remote offset " + std::to_string(op.roffset) +
                  " overruns the peer's buffer of " + std::to_string(g.length) + " bytes";
      ++s.completed;
      continue;
    }
    op.raddr = g.addr + op.roffset;
    op.rkey = g.rkey;
    writes_.emplace(op.id, op);
    fc_.enqueue(kCookieWrite | op.id, op.wrs);
    ++stats_.writesSent;
    stats_.maxQueued = std::max<uint64_t>(stats_.maxQueued, fc_.queued());
  }
}

// ---- completions (mu_ held) --------------------------------------------------------------

std::string Pair::describeWc(const ibv_wc& wc) const {
  // On an error completion only wr_id, status, qp_num and vendor_err are defined.
  return "work completion error: " + std::string(ibv_wc_status_str(wc.status)) + " (status " +
         std::to_string(int(wc.status)) + ", vendor_err " + hex(wc.vendor_err) + ") on " +
         kindName(wc.wr_id) + " wr_id " + hex(wc.wr_id) + ", qpn " + hex(wc.qp_num) + " -> peer qpn " +
         hex(peer_.qpn);
}

void Pair::handle(const ibv_wc& wc) {
  ++stats_.completions;
  if (wc.status != IBV_WC_SUCCESS) {
    fail(describeWc(wc));
    return;
  }
  const uint64_t v = valueOf(wc.wr_id);
  switch (kindOf(wc.wr_id)) {
    case kRecv: {
      const uint32_t idx = uint32_t(v);
      if (idx >= fc_.recvQueueDepth())
        throw ProtocolError(label_ + ": receive completion for unknown wr_id " + hex(wc.wr_id));
      const uint8_t* p = recvStaging_.data() + size_t(idx) * slotBytes_;
      const bool imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        const uint32_t slot = ntohl(wc.imm_data);
        postRecv(idx);
        fc_.onDataReceived();
        auto it = recvSlots_.find(slot);
        if (it == recvSlots_.end() || !it->second.buf)
          throw ProtocolError(label_ + ": RDMA write for slot " + std::to_string(slot) +
                              ", which has no receive buffer");
        ++it->second.arrived;
        it->second.lengths.push_back(wc.byte_len);
        ++stats_.writesReceived;
        return;
      }
      if (wc.opcode != IBV_WC_RECV)
        throw ProtocolError(label_ + ": unexpected receive opcode " + std::to_string(int(wc.opcode)));
      if (imm && wc.byte_len == 0) {  // ack
        const uint32_t credits = ntohl(wc.imm_data);
        postRecv(idx);
        fc_.onAckReceived(credits);
        ++stats_.acksReceived;
        return;
      }
      if (wc.byte_len < kHeader || wc.byte_len > slotBytes_ || p[0] != kMagic || p[1] != kVersion)
        throw ProtocolError(label_ + ": malformed SEND of " + std::to_string(wc.byte_len) + " bytes (magic " +
                            hex(p[0]) + ", version " + std::to_string(p[1]) + ")");
      const uint8_t type = p[2];
      const uint32_t tag = get32(p + 4);
      if (type == kTypeMessage && !imm) {
        Message m{tag, std::vector<uint8_t>(p + kHeader, p + wc.byte_len)};
        postRecv(idx);
        fc_.onDataReceived();
        if (tag == kCloseTag) peerClosed_ = true;
        inbox_.push_back(std::move(m));
        ++stats_.messagesReceived;
        return;
      }
      if (type == kTypeAbort && !imm) {
        postRecv(idx);
        fc_.onDataReceived();
        fail("the peer gave up: " + std::string(p + kHeader, p + wc.byte_len));
        return;
      }
      if (type == kTypeGrant && imm && wc.byte_len == kHeader + kGrantBody && ntohl(wc.imm_data) == tag) {
        Grant g{get64(p + kHeader + 8), get64(p + kHeader + 16), get32(p + kHeader + 4), get32(p + kHeader)};
        postRecv(idx);
        fc_.onDataReceived();
        if (g.count == 0) throw ProtocolError(label_ + ": grant of 0 writes for slot " + std::to_string(tag));
        sendSlots_[tag].grants.push_back(g);
        ++stats_.grantsReceived;
        matchWrites(tag);
        return;
      }
      throw ProtocolError(label_ + ": unknown SEND (type " + std::to_string(type) + ", " +
                          (imm ? "with" : "without") + " immediate, " + std::to_string(wc.byte_len) +
                          " bytes)");
    }
    case kSendCtl:
      if (v >= opts_.dataWr)
        throw ProtocolError(label_ + ": send completion for unknown wr_id " + hex(wc.wr_id));
      freeSendStaging_.push_back(uint32_t(v));
      fc_.onDataCompletion();
      return;
    case kAckWr: fc_.onAckCompletion(); return;
    case kProbe: probeOutstanding_ = false; return;
    case kWrite: {
      fc_.onDataCompletion();
      auto it = writes_.find(v);
      if (it == writes_.end())
        throw ProtocolError(label_ + ": completion for unknown write " + hex(wc.wr_id));
      if (++it->second.completedWrs == it->second.wrs) {
        ++sendSlots_[it->second.slot].completed;
        writes_.erase(it);
      }
      return;
    }
  }
  throw ProtocolError(label_ + ": completion with unknown wr_id " + hex(wc.wr_id));
}

int Pair::pollLocked() {
  if (!error_.empty()) return 0;
  ibv_wc wc[16];
  int total = 0;
  try {
    for (;;) {
      ++stats_.pollCalls;
      const int n = ibv_poll_cq(cq_, 16, wc);
      if (n < 0) {
        fail("ibv_poll_cq failed (" + std::to_string(n) + ")");
        return total;
      }
      for (int i = 0; i < n; ++i) handle(wc[i]);
      total += n;
      if (n < 16) break;
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (total) afterChange();
  return total;
}

void Pair::afterChange() {
  if (error_.empty()) {
    try {
      if (peerClosed_ && fc_.queued() == 0) fc_.forgetOwedCredits();  // see kCloseTag
      while (auto a = fc_.takeAck()) postAck(a->imm());
      if (connected_) fc_.flush([this](uint64_t c, uint32_t i, uint32_t n) { postItem(c, i, n); });
      while (auto a = fc_.takeAck()) postAck(a->imm());
      ensureArmed();
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }
  cv_.notify_all();
}

bool Pair::needAnyCompletion() const {
  return !opts_.solicited || fc_.queued() > 0 || fc_.ackDue() || sendWaiters_ > 0;
}

void Pair::ensureArmed() {
  if (!event_ || armedNext_ || !needAnyCompletion()) return;
  // "next completion" overrides a pending "solicited only"; CQEs already there raise no
  // event, so drain after arming.
  {
    std::lock_guard<std::mutex> arm(dev_->armMu_);
    if (int rc = ibv_req_notify_cq(cq_, 0)) throwSystemError(label_ + ": ibv_req_notify_cq(next)", rc);
  }
  armedNext_ = true;
  pollLocked();
}

void Pair::rearm() {
  armedNext_ = needAnyCompletion();
  std::lock_guard<std::mutex> arm(dev_->armMu_);
  if (int rc = ibv_req_notify_cq(cq_, armedNext_ ? 0 : 1))
    throwSystemError(label_ + ": ibv_req_notify_cq", rc);
}

void PairGroup::fail(const std::string& what) {
  std::lock_guard<std::mutex> g(mu_);
  if (!error_.empty()) return;
  error_ = what;
  failed_.store(true, std::memory_order_release);
}

std::string PairGroup::error() const {
  std::lock_guard<std::mutex> g(mu_);
  return error_;
}

void PairGroup::join(Pair* p) {
  std::lock_guard<std::mutex> g(mu_);
  members_.push_back(p);
}

void PairGroup::leave(Pair* p) {
  std::lock_guard<std::mutex> g(mu_);
  members_.erase(std::remove(members_.begin(), members_.end(), p), members_.end());
}

std::vector<Pair*> PairGroup::claimAbort() {
  std::lock_guard<std::mutex> g(mu_);
  if (aborted_ || error_.empty()) return {};
  aborted_ = true;
  return members_;
}

void Pair::setGroup(std::shared_ptr<PairGroup> group) {
  if (group_) group_->leave(this);
  group_ = std::move(group);
  if (group_) group_->join(this);
}

void Pair::abortPeers() {
  if (!group_) return;
  const std::vector<Pair*> members = group_->claimAbort();
  if (members.empty()) return;
  const std::string why = group_->error();
  // Only this one call per group gets here, so it is the only thread holding one pair's lock
  // while taking another's: no lock cycle. The members are the group's live pairs (a pair
  // leaves before its destructor waits for anything).
  for (Pair* p : members) {
    if (p == this) {
      sendAbortLocked(why);
    } else {
      std::lock_guard<std::mutex> g(p->mu_);
      p->sendAbortLocked(why);
    }
  }
}

void Pair::sendAbortLocked(const std::string& why) {
  if (!error_.empty() || !connected_) return;  // this link is the broken one, or the peer told us
  const std::string body = why.substr(0, opts_.maxMessageBytes);
  enqueueControl(kTypeAbort, 0, body.data(), body.size());
  afterChange();
}

void Pair::fail(const std::string& what) {
  if (error_.empty()) {
    error_ = label_ + ": " + what;
    if (group_) group_->fail(error_);
  }
  cv_.notify_all();
}

void Pair::probe() {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock() || !connected_ || !error_.empty()) return;
  pollLocked();  // the completion of the last probe may be waiting
  if (probeOutstanding_ || !error_.empty()) return;
  // C9-88: an RDMA WRITE of zero bytes carries no address or key the responder checks, and
  // consumes no receive; only its ACK matters.
  ibv_send_wr wr{};
  wr.wr_id = wrId(kProbe, 0);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(qp_, &wr, &bad)) {
    fail("ibv_post_send(liveness probe) failed: " + std::string(std::strerror(rc)));
    return;
  }
  probeOutstanding_ = true;
  ++stats_.probesSent;
}

std::string Pair::portNote() const {
  // A waiting receiver whose own link went down sees no error completion (it has nothing in
  // flight); its port state is the clue.
  ibv_port_attr pa{};
  if (ibv_query_port(dev_->context(), dev_->port(), &pa) != 0 || pa.state == IBV_PORT_ACTIVE) return "";
  return "; " + dev_->name() + " port " + std::to_string(dev_->port()) + " is " +
         ibv_port_state_str(pa.state);
}

void Pair::throwIfFailed() {
  if (error_.empty()) return;
  abortPeers();
  throw IoError(error_);
}

// ---- progress ----------------------------------------------------------------------------

int Pair::progress(bool always) {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return 0;
  // Held-up work needs this pair's completions: credits and grants come back through its CQ.
  if (!always && fc_.queued() == 0 && !fc_.ackDue() && writesWithoutGrant_ == 0) return 0;
  return pollLocked();
}

void Pair::onEvent(ibv_cq* cq) {
  std::lock_guard<std::mutex> g(mu_);
  ++stats_.events;
  if (++eventsUnacked_ >= 64) {  // ibv_ack_cq_events takes a lock: batch it
    ibv_ack_cq_events(cq, eventsUnacked_);
    eventsUnacked_ = 0;
  }
  try {
    rearm();
  } catch (const std::exception& e) {
    fail(e.what());
  }
  pollLocked();
  cv_.notify_all();
}

Pair::Clock::time_point Pair::deadline(std::optional<std::chrono::milliseconds> t) const {
  return Clock::now() + t.value_or(opts_.timeout);
}

template <class Pred>
void Pair::waitFor(std::unique_lock<std::mutex>& lk, Pred pred, Clock::time_point dl, const char* what) {
  const auto start = Clock::now();
  auto probed = start;  // when this wait last probed (PairOptions::probeInterval)
  int idle = 0;         // busy polling: rounds in a row that found nothing
  auto swept = start;   // busy polling: when every pair of the device was last polled
  for (;;) {
    if (pred()) return;
    throwIfFailed();
    if (group_ && group_->failed()) {
      abortPeers();
      throw IoError(label_ + ": gave up waiting for " + what + ": another pair failed: " + group_->error());
    }
    const auto now = Clock::now();
    if (now >= dl) {
      throw TimeoutError(
          label_ + ": timed out after " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count()) +
          " ms waiting for " + what + " (" + state_locked() + ")" + portNote());
    }
    if (opts_.probeInterval.count() > 0 && now - probed >= opts_.probeInterval) {
      probed = now;
      lk.unlock();  // probeAll takes each pair's lock, this one's too
      dev_->probeAll();
      lk.lock();
      continue;
    }
    if (!event_) {
      lk.unlock();
      // Busy polling: this pair, the pairs of the device with work held up (so acks and
      // grants keep flowing), and every 10 ms all of them (Device::progressFor). A round that
      // found nothing yields the CPU (it returns at once on a dedicated core); after
      // busyPollSpins such rounds the wait naps, growing from 20 to 200 us, so more threads
      // than cores (ranks as threads, a loaded machine) still leave the CPU to whoever has
      // work. Anything found resets it. A round spent mostly off the CPU (a provider whose
      // poll blocks until the device has progressed, as a simulator's does) was no spin and
      // does not count: napping then only delays the thread's answer.
      const bool sweep = now - swept >= std::chrono::milliseconds(10);
      if (sweep) swept = now;
      const uint64_t cpu0 = threadCpuNs();
      if (dev_->progressFor(this, sweep) > 0) {
        idle = 0;
      } else if (const int spins = dev_->busyPollSpins();
                 spins < 0 || !spunOnCpu(cpu0, now) || ++idle <= spins) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20 * std::min(idle - spins, 10)));
      }
      lk.lock();
    } else {
      ensureArmed();
      // One non-blocking poll before sleeping (what an event-driven program does anyway to
      // close the arm/poll race); the loop thread wakes us.
      pollLocked();
      if (pred() || !error_.empty()) continue;
      // Bounded: a failure on another pair of the group does not notify our cv_.
      cv_.wait_until(lk, std::min(dl, Clock::now() + std::chrono::milliseconds(50)));
    }
  }
}

// ---- messages ----------------------------------------------------------------------------

void Pair::send(uint32_t tag, const void* data, size_t len) {
  if (len > opts_.maxMessageBytes)
    throw std::invalid_argument(label_ + ": message of " + std::to_string(len) +
                                " bytes exceeds maxMessageBytes " + std::to_string(opts_.maxMessageBytes));
  std::unique_lock<std::mutex> lk(mu_);
  throwIfFailed();
  enqueueControl(kTypeMessage, tag, data, len);
  afterChange();
  throwIfFailed();
}

std::vector<uint8_t> Pair::recv(uint32_t tag, std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  auto find = [&] {
    return std::find_if(inbox_.begin(), inbox_.end(), [&](const Message& m) { return m.tag == tag; });
  };
  const std::string what = "a message with tag " + std::to_string(tag);
  waitFor(
      lk, [&] { return find() != inbox_.end(); }, deadline(timeout), what.c_str());
  auto it = find();
  std::vector<uint8_t> out = std::move(it->bytes);
  inbox_.erase(it);
  return out;
}

bool Pair::tryRecv(uint32_t tag, std::vector<uint8_t>& out) {
  std::unique_lock<std::mutex> lk(mu_);
  throwIfFailed();
  auto it = std::find_if(inbox_.begin(), inbox_.end(), [&](const Message& m) { return m.tag == tag; });
  if (it == inbox_.end()) return false;
  out = std::move(it->bytes);
  inbox_.erase(it);
  return true;
}

void Pair::settleAcks(std::chrono::milliseconds timeout) {
  // The last flow-control acks: their ACKs are microseconds away unless the peer already
  // destroyed its QP (then they never come). Destroying ours before they arrive abandons work
  // in flight, which the simulator reports as a hazard; so wait a little, never long.
  try {
    waitSends([&] { return fc_.quiescent(); }, timeout, "the last acks to complete");
  } catch (...) {
  }
}

void Pair::drain(std::optional<std::chrono::milliseconds> timeout) {
  waitSends([&] { return fc_.dataQuiescent(); }, timeout, "all queued work to complete");
}

template <typename Pred>
void Pair::waitSends(Pred done, std::optional<std::chrono::milliseconds> timeout, const char* what) {
  std::unique_lock<std::mutex> lk(mu_);
  ++sendWaiters_;  // completions are handled for us while we wait
  try {
    waitFor(lk, done, deadline(timeout), what);
  } catch (...) {
    --sendWaiters_;
    throw;
  }
  --sendWaiters_;
}

// ---- buffers -----------------------------------------------------------------------------

std::unique_ptr<SendBuffer> Pair::createSendBuffer(uint32_t slot, void* ptr, size_t size) {
  return createSendBuffer(slot, std::make_shared<MemoryRegion>(dev_, ptr, size), 0, size);
}

std::unique_ptr<SendBuffer> Pair::createSendBuffer(uint32_t slot, std::shared_ptr<MemoryRegion> mr,
                                                   size_t offset, size_t size) {
  if (!mr || offset > mr->size() || size > mr->size() - offset)
    throw std::invalid_argument(label_ + ": send buffer for slot " + std::to_string(slot) +
                                " outside its memory region");
  std::lock_guard<std::mutex> g(mu_);
  SendSlot& s = sendSlots_[slot];
  if (s.buf)
    throw std::invalid_argument(label_ + ": slot " + std::to_string(slot) + " already has a send buffer");
  std::unique_ptr<SendBuffer> b(new SendBuffer(this, slot, std::move(mr), offset, size));
  s.buf = b.get();
  return b;
}

std::unique_ptr<RecvBuffer> Pair::createRecvBuffer(uint32_t slot, void* ptr, size_t size, uint32_t grants) {
  return createRecvBuffer(slot, std::make_shared<MemoryRegion>(dev_, ptr, size), 0, size, grants);
}

std::unique_ptr<RecvBuffer> Pair::createRecvBuffer(uint32_t slot, std::shared_ptr<MemoryRegion> mr,
                                                   size_t offset, size_t size, uint32_t grants) {
  if (!mr || offset > mr->size() || size > mr->size() - offset)
    throw std::invalid_argument(label_ + ": receive buffer for slot " + std::to_string(slot) +
                                " outside its memory region");
  std::unique_ptr<RecvBuffer> b;
  {
    std::lock_guard<std::mutex> g(mu_);
    RecvSlot& s = recvSlots_[slot];
    if (s.buf)
      throw std::invalid_argument(label_ + ": slot " + std::to_string(slot) +
                                  " already has a receive buffer");
    b.reset(new RecvBuffer(this, slot, std::move(mr), offset, size));
    s.buf = b.get();
  }
  if (grants) grant(b.get(), grants);
  return b;
}

void Pair::removeSendBuffer(SendBuffer* b) {
  std::unique_lock<std::mutex> lk(mu_);
  auto it = sendSlots_.find(b->slot_);
  if (it == sendSlots_.end() || it->second.buf != b) return;
  SendSlot& s = it->second;
  // Sends without a grant never touched the memory: drop them. Others are in flight or
  // queued: the memory must outlive them.
  s.issued -= s.waiting.size();
  writesWithoutGrant_ -= s.waiting.size();
  s.waiting.clear();
  ++sendWaiters_;
  try {
    waitFor(
        lk, [&] { return s.completed >= s.issued; }, deadline(std::nullopt),
        "outstanding sends (buffer destroyed)");
  } catch (...) {
  }
  --sendWaiters_;
  s.buf = nullptr;
  s.issued = s.completed = 0;
  s.error.clear();
  // Grants nobody will use (a receiver that grants ahead, buffers.h): they name memory the peer
  // deregisters with its RecvBuffer, so no later buffer of this slot may take them.
  s.grants.clear();
}

void Pair::removeRecvBuffer(RecvBuffer* b) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = recvSlots_.find(b->slot_);
  if (it != recvSlots_.end() && it->second.buf == b) recvSlots_.erase(it);
}

void Pair::sendWrite(SendBuffer* b, size_t offset, size_t length, size_t roffset) {
  if (offset > b->size_ || length > b->size_ - offset)
    throw std::invalid_argument(label_ + ": send of " + std::to_string(length) + " bytes at offset " +
                                std::to_string(offset) + " outside the send buffer of slot " +
                                std::to_string(b->slot_) + " (" + std::to_string(b->size_) + " bytes)");
  std::unique_lock<std::mutex> lk(mu_);
  throwIfFailed();
  WriteOp op{};
  op.id = nextId_++;
  op.slot = b->slot_;
  op.laddr = reinterpret_cast<uintptr_t>(b->mr_->ptr()) + b->offset_ + offset;
  op.lkey = b->mr_->lkey();
  op.length = length;
  op.roffset = roffset;
  op.wrs = uint32_t(std::max<size_t>(1, (length + opts_.maxWriteBytes - 1) / opts_.maxWriteBytes));
  SendSlot& s = sendSlots_[b->slot_];
  ++s.issued;
  s.waiting.push_back(op);
  ++writesWithoutGrant_;
  matchWrites(b->slot_);
  afterChange();
  throwIfFailed();
}

void Pair::waitSend(SendBuffer* b, uint64_t atMost, std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  SendSlot& s = sendSlots_[b->slot_];
  const std::string what = "send completions on slot " + std::to_string(b->slot_);
  ++sendWaiters_;
  try {
    waitFor(
        lk, [&] { return s.issued - s.completed <= atMost; }, deadline(timeout), what.c_str());
  } catch (...) {
    --sendWaiters_;
    throw;
  }
  --sendWaiters_;
  if (!s.error.empty()) {
    std::string e;
    e.swap(s.error);
    throw Error(e);
  }
}

uint64_t Pair::outstanding(const SendBuffer* b) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = sendSlots_.find(b->slot_);
  return it == sendSlots_.end() ? 0 : it->second.issued - it->second.completed;
}

void Pair::grant(RecvBuffer* b, uint32_t count) {
  if (count == 0) return;
  uint8_t body[kGrantBody];
  put32(body, count);
  put32(body + 4, b->mr_->rkey());
  put64(body + 8, reinterpret_cast<uintptr_t>(b->mr_->ptr()) + b->offset_);
  put64(body + 16, b->size_);
  std::unique_lock<std::mutex> lk(mu_);
  throwIfFailed();
  recvSlots_[b->slot_].granted += count;
  enqueueControl(kTypeGrant, b->slot_, body, sizeof body);
  afterChange();
  throwIfFailed();
}

uint32_t Pair::waitRecv(RecvBuffer* b, std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  RecvSlot& s = recvSlots_[b->slot_];
  const std::string what = "an RDMA write into slot " + std::to_string(b->slot_);
  waitFor(
      lk, [&] { return s.arrived > s.taken; }, deadline(timeout), what.c_str());
  ++s.taken;
  const uint32_t len = s.lengths.front();
  s.lengths.pop_front();
  return len;
}

uint64_t Pair::ready(const RecvBuffer* b) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = recvSlots_.find(b->slot_);
  return it == recvSlots_.end() ? 0 : it->second.arrived - it->second.taken;
}

// ---- introspection -----------------------------------------------------------------------

Pair::Stats Pair::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

std::string Pair::error() const {
  std::lock_guard<std::mutex> g(mu_);
  return error_;
}

std::string Pair::state() const {
  std::lock_guard<std::mutex> g(mu_);
  return state_locked();
}

std::string Pair::state_locked() const {
  std::string s = "qpn " + hex(self_.qpn) + " -> " + hex(peer_.qpn) + ", " + fc_.str() + ", inbox " +
                  std::to_string(inbox_.size());
  for (const auto& [slot, ss] : sendSlots_)
    if (ss.issued != ss.completed || !ss.grants.empty() || !ss.waiting.empty())
      s += ", send slot " + std::to_string(slot) + ": " + std::to_string(ss.issued - ss.completed) +
           " outstanding, " + std::to_string(ss.waiting.size()) + " without grant, " +
           std::to_string(ss.grants.size()) + " grants";
  for (const auto& [slot, rs] : recvSlots_)
    s += ", recv slot " + std::to_string(slot) + ": granted " + std::to_string(rs.granted) + " arrived " +
         std::to_string(rs.arrived) + " taken " + std::to_string(rs.taken);
  return s;
}

}  // namespace hcasim::verbs
