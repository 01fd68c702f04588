// SPDX-License-Identifier: Apache-2.0
#include "mad_agent.h"

#include <endian.h>
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <cstring>

#include "../provider/objects.h"
#include "../provider/verbs_core.h"

namespace hcasim::drv::cm {

namespace {

/**
 * The sender's GID from the 40 bytes a UD receive starts with: an IPv6 header's source address,
 * or, after 20 unused bytes, an IPv4 header's source address as its IPv4-mapped GID.
 */
void source_gid(const uint8_t* nh, uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  if ((nh[0] >> 4) == 6) {
    std::memcpy(gid, nh + 8, 16);
  } else {
    gid[10] = gid[11] = 0xff;
    std::memcpy(gid + 12, nh + 20 + 12, 4);
  }
}

}  // namespace

std::unique_ptr<MadAgent> MadAgent::open(ibv_device* dev) {
  std::unique_ptr<MadAgent> a(new MadAgent());
  if (int e = a->setup(dev)) {
    errno = e;
    return nullptr;
  }
  return a;
}

MadAgent::~MadAgent() {
  for (auto& [gid, ah] : ahs_) destroy_ah(ah);
  if (qp_) destroy_qp(qp_);
  if (mr_) dereg_mr(mr_);
  if (buf_) link().free_dma_pages(buf_, kBufBytes);
  if (cq_) destroy_cq(cq_);
  if (channel_) destroy_comp_channel(channel_);
  if (pd_) dealloc_pd(pd_);
  if (ctx_) close_device(ctx_);
}

HcaLink& MadAgent::link() const { return *sim(ctx_)->sdev->link; }

int MadAgent::setup(ibv_device* dev) {
  if (!(ctx_ = open_device(dev)) || !(pd_ = alloc_pd(ctx_)) || !(channel_ = create_comp_channel(ctx_)))
    return errno ? errno : ENODEV;
  // The agent waits on the channel with poll(2) and takes its events itself.
  fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  if (!(cq_ = create_cq(ctx_, int(kRecvSlots + kSendSlots), nullptr, channel_, 0))) return errno;
  if (!(buf_ = link().alloc_dma_pages(kBufBytes))) return ENOMEM;
  send_busy_.assign(kSendSlots, false);
  if (!(mr_ = reg_mr(pd_, buf_, kBufBytes, uintptr_t(buf_), IBV_ACCESS_LOCAL_WRITE))) return errno;
  for (uint32_t i = 0; i < hw::kGidTableLen; ++i)
    if (query_gid(ctx_, 1, int(i), &gids_[i])) return errno ? errno : EINVAL;
  guid_ = be64toh(get_device_guid(dev));
  if (int e = bring_up_qp()) return e;
  for (uint32_t i = 0; i < kRecvSlots; ++i)
    if (int e = post_recv(i)) return e;
  arm();
  return 0;
}

int MadAgent::bring_up_qp() {
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq_;
  ia.qp_type = IBV_QPT_UD;
  ia.sq_sig_all = 1;  // every send slot is freed by its completion
  ia.cap.max_send_wr = kSendSlots;
  ia.cap.max_recv_wr = kRecvSlots;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  if (!(qp_ = create_gsi_qp(pd_, &ia))) return errno;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = 0x80010000;  // the GSI's well-known Q_Key (IBTA 13.5.3)
  if (int e = modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return e;
  a.qp_state = IBV_QPS_RTR;
  if (int e = modify_qp(qp_, &a, IBV_QP_STATE)) return e;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  return modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int MadAgent::post_recv(uint32_t slot) {
  ibv_sge sge{uintptr_t(buf_ + slot * kRecvBytes), uint32_t(kRecvBytes), mr_->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(qp_, &wr, &bad);
}

ibv_ah* MadAgent::ah_for(const uint8_t dgid[16]) {
  std::array<uint8_t, 16> key;
  std::memcpy(key.data(), dgid, 16);
  if (auto it = ahs_.find(key); it != ahs_.end()) return it->second;
  ibv_ah_attr a{};
  a.is_global = 1;
  a.port_num = 1;
  a.grh.sgid_index = sgid_index_for(dgid);  // IPv6 peers from the link-local GID
  a.grh.hop_limit = 64;
  std::memcpy(a.grh.dgid.raw, dgid, 16);
  ibv_ah* ah = create_ah(pd_, &a);
  if (ah) ahs_[key] = ah;
  return ah;
}

bool MadAgent::owns(const uint8_t g[16]) const {
  for (const ibv_gid& mine : gids_)
    if (std::memcmp(mine.raw, g, 16) == 0) return true;
  return false;
}

bool MadAgent::resolve(const uint8_t gid[16], uint8_t mac[6]) {
  hw::GidQuery q{};
  std::memcpy(q.gid, gid, 16);
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::ResolveGid, q);
  if (sim(ctx_)->kdev->command(mb) != 0) return false;
  std::memcpy(mac, hw::cmd_out<hw::Neighbour>(mb).mac, 6);
  return true;
}

int MadAgent::send(const uint8_t dgid[16], const uint8_t mad[kMadBytes]) {
  uint32_t slot = kSendSlots;
  for (uint32_t i = 0; i < kSendSlots && slot == kSendSlots; ++i)
    if (!send_busy_[(next_send_ + i) % kSendSlots]) slot = (next_send_ + i) % kSendSlots;
  if (slot == kSendSlots) return ENOBUFS;  // 64 MADs unsent: the kernel's queue is full too
  ibv_ah* ah = ah_for(dgid);
  if (!ah) return errno ? errno : EINVAL;
  uint8_t* b = buf_ + kRecvSlots * kRecvBytes + slot * kMadBytes;
  std::memcpy(b, mad, kMadBytes);
  ibv_sge sge{uintptr_t(b), uint32_t(kMadBytes), mr_->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kRecvSlots + slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = 1;
  wr.wr.ud.remote_qkey = 0x80010000;
  if (int e = ibv_post_send(qp_, &wr, &bad)) return e;
  send_busy_[slot] = true;
  next_send_ = (slot + 1) % kSendSlots;
  return 0;
}

int MadAgent::progress(const std::function<void(const ReceivedMad&)>& on_mad) {
  int got = 0;
  ibv_wc wc[16];
  for (int n; (n = ibv_poll_cq(cq_, 16, wc)) > 0;) {
    for (int i = 0; i < n; ++i) {
      const uint64_t id = wc[i].wr_id;
      if (id >= kRecvSlots) {  // a send slot is free again, sent or not
        send_busy_[id - kRecvSlots] = false;
        continue;
      }
      const uint8_t* b = buf_ + id * kRecvBytes;
      if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= 40 + kMadBytes) {
        ReceivedMad m{b + 40, {}, wc[i].src_qp};
        source_gid(b, m.sgid);
        on_mad(m);
        ++got;
      }
      // A flushed buffer stays out: the QP is in ERR, and posting it again would flush it again.
      if (wc[i].status != IBV_WC_WR_FLUSH_ERR) post_recv(uint32_t(id));
    }
  }
  return got;
}

bool MadAgent::sends_pending() const {
  for (bool busy : send_busy_)
    if (busy) return true;
  return false;
}

void MadAgent::leave_dreq(uint32_t local_id, bool leave, const uint8_t dgid[16], uint32_t remote_id,
                          uint32_t remote_qpn, uint64_t tid) {
  hw::LeftDreq d{};
  if (leave) {
    std::memcpy(d.path.dgid, dgid, 16);
    d.path.sgid_index = sgid_index_for(dgid);
    d.path.hop_limit = 64;
    d.remote_comm_id = remote_id;
    d.remote_qpn = remote_qpn;
    d.tid = tid;
  }
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::SetLeftDreq, d, local_id, leave ? 1 : 0);
  // Nothing to do on failure: the process then ends its connections only while it runs.
  (void)sim(ctx_)->kdev->command(mb);
}

bool MadAgent::has_completion() const { return cq_has_completion(cq_); }

void MadAgent::arm() {
  // Once per event: a CQ stays armed until its next completion event.
  if (!armed_) armed_ = ibv_req_notify_cq(cq_, 0) == 0;
}

void MadAgent::take_events() {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  unsigned n = 0;
  // Only what is there: a get_cq_event on an empty channel counts as a wait (and is traced so).
  pollfd p{channel_->fd, POLLIN, 0};
  while (poll(&p, 1, 0) > 0 && get_cq_event(channel_, &cq, &ctx) == 0) ++n;
  if (!n) return;
  ack_cq_events(cq_, n);
  armed_ = false;
}

}  // namespace hcasim::drv::cm
