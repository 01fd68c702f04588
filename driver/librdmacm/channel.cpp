// SPDX-License-Identifier: Apache-2.0
// Event channels: a channel is a descriptor of the kernel's ucma (hcasim_ucma_open), and a
// synchronous id (created without a channel) owns a private one and waits on it per call.
#include <hcasim/ucma.h>

#include <cstdlib>

#include "cma_private.h"

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT rdma_event_channel* rdma_create_event_channel(void) {
  if (ucma_init()) return nullptr;
  auto* channel = static_cast<rdma_event_channel*>(std::malloc(sizeof(rdma_event_channel)));
  if (!channel) {
    errno = ENOMEM;
    return nullptr;
  }
  channel->fd = hcasim_ucma_open();
  if (channel->fd < 0) {
    const int e = errno;
    std::free(channel);
    errno = e;
    return nullptr;
  }
  return channel;
}

HCASIM_RDMACM_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (!channel) return;
  hcasim_ucma_close(channel->fd);
  std::free(channel);
}

namespace hcasim::rdmacm {

int ucma_complete(rdma_cm_id* id) {
  CmaId* id_priv = from_id(id);
  if (!id_priv->sync) return 0;
  if (id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  if (rdma_get_cm_event(id->channel, &id->event)) return -1;
  const int status = id->event->status;
  if (!status) return 0;
  if (id->event->event == RDMA_CM_EVENT_REJECTED) return err(ECONNREFUSED);
  return err(status < 0 ? -status : status);
}

}  // namespace hcasim::rdmacm
