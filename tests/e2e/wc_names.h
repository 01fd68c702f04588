// SPDX-License-Identifier: Apache-2.0
/**
 * @file wc_names.h
 * @brief Names of work-completion opcodes for test output, shared by the e2e/conformance
 *        fixture (tests/e2e/verbs_fixture.h) and the differential scenarios (tests/diff).
 */
#pragma once

#include <infiniband/verbs.h>

namespace e2e {

/** @brief The IBV_WC_* opcode's name without its prefix; "OPCODE?" for one this list lacks. */
inline const char* wc_opcode_name(int op) {
  switch (op) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_COMP_SWAP: return "COMP_SWAP";
    case IBV_WC_FETCH_ADD: return "FETCH_ADD";
    case IBV_WC_BIND_MW: return "BIND_MW";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: return "OPCODE?";
  }
}

}  // namespace e2e
