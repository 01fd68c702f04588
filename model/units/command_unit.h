// SPDX-License-Identifier: Apache-2.0
/**
 * @file command_unit.h
 * @brief The HCA's command interface (firmware): the driver's control path programs PD, MKey,
 *        EQ, CQ and QP contexts through mailboxes; resource numbers are allocated here.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_set>

#include <hcasim/hca_hw.h>

#include "cq_unit.h"
#include "eq_unit.h"
#include "mr_table.h"
#include "qpc_cache.h"
#include "srq_table.h"

namespace hcasim::model {

/** @brief The firmware: executes command mailboxes that create, modify and destroy contexts. */
class CommandUnit {
 public:
  /**
   * @param tracer where command events go
   * @param qpc, srqs, mrs, cq, eq the units whose contexts commands program
   * @param caps what QueryHcaCap answers
   * @param on_state called after a QP changes state (RTR/RTS setup, ERR flush)
   * @param first_qpn the number of the first QP created (qpn_base())
   */
  CommandUnit(Tracer& tracer, QpcCache& qpc, SrqTable& srqs, MrTable& mrs, CqUnit& cq, EqUnit& eq,
              hw::HcaCaps caps, std::function<void(QpContext&, hw::QpState from)> on_state,
              uint32_t first_qpn = 0x11);

  /**
   * @brief The first QPN of host @p host_index: 0x11 above the host index in bits 16..23, so
   * hcasim0's QPs are 0x000011, 0x000012... and hcasim1's 0x010011..., and a trace tells local
   * from remote QPs at a glance. (QPNs 0 and 1 are the special QPs; rxe also starts at 0x11.)
   */
  static uint32_t qpn_base(uint32_t host_index) { return ((host_index & 0xff) << 16) | 0x11; }

  /** @brief Execute one command; status and out are filled in the mailbox. */
  void execute(hw::CmdMailbox& mb);
  const hw::HcaCaps& caps() const { return caps_; }
  /** @brief Forget every PD and XRC domain (function reset; numbers keep counting up, so stale ones stay
   * invalid). */
  void reset_pds() {
    pds_.clear();
    xrcds_.clear();
  }

 private:
  hw::CmdStatus modify_qp(QpContext& qp, uint32_t mask, const hw::Qpc& in);
  // The commands that allocate a number (returned in arg0), and QueryQp.
  hw::CmdStatus create_mkey(hw::CmdMailbox& mb);
  hw::CmdStatus alloc_mw(hw::CmdMailbox& mb);
  hw::CmdStatus create_eq(hw::CmdMailbox& mb);
  hw::CmdStatus create_cq(hw::CmdMailbox& mb);
  hw::CmdStatus resize_cq(hw::CmdMailbox& mb);
  hw::CmdStatus create_qp(hw::CmdMailbox& mb);
  hw::CmdStatus query_qp(hw::CmdMailbox& mb);
  hw::CmdStatus create_srq(hw::CmdMailbox& mb);
  hw::CmdStatus arm_srq(hw::CmdMailbox& mb);
  hw::CmdStatus query_srq(hw::CmdMailbox& mb);
  hw::CmdStatus destroy_srq(hw::CmdMailbox& mb);
  hw::CmdStatus dealloc_xrcd(hw::CmdMailbox& mb);
  /** @brief The queues a new QP names exist and suit its type (XRC receive QPs have none). */
  hw::CmdStatus check_qp_resources(const hw::Qpc& q);

  Tracer& tracer_;
  QpcCache& qpc_;
  SrqTable& srqs_;
  MrTable& mrs_;
  CqUnit& cq_;
  EqUnit& eq_;
  hw::HcaCaps caps_;
  std::function<void(QpContext&, hw::QpState)> on_state_;
  uint32_t next_pdn_ = 1, next_qpn_, next_cqn_ = 1, next_eqn_ = 1, next_mkey_ = 1, next_srqn_ = 1;
  uint8_t mkey_tag_ = 0x2a;
  std::unordered_set<uint32_t> pds_;
  std::unordered_set<uint32_t> xrcds_;  ///< XRC domains (their numbers count with the PDs')
};

}  // namespace hcasim::model
