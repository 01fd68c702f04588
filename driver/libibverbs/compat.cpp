// SPDX-License-Identifier: Apache-2.0
/**
 * @file compat.cpp
 * @brief Exports that must exist for binaries to load but that nothing we support calls:
 *        the IBVERBS_1.0 compat entry points and the IBVERBS_PRIVATE_34 provider interface.
 *
 * IBVERBS_1.0 (non-default, name@IBVERBS_1.0): the pre-1.1 ABI took differently shaped
 * structs. Only binaries linked before 2006 bind to these; they fail cleanly (errno
 * EOPNOTSUPP; NULL, -1, 0 or nothing) without touching their arguments beyond *num_devices.
 *
 * IBVERBS_PRIVATE_34: the interface rdma-core's own provider libraries (libmlx5, libefa, ...)
 * link against. perftest links libmlx5/libefa directly, and with BIND_NOW every one of their
 * references must resolve when the process starts, so all of them exist here. Their
 * constructors call verbs_register_driver_34(), which must therefore be a harmless no-op;
 * everything else reports EOPNOTSUPP. The real argument lists are irrelevant to a stub that
 * ignores them (C linkage, caller-cleaned calls), so most are declared without parameters.
 *
 * ibv_query_gid_type (also PRIVATE_34) is a real implementation and lives in exports.cpp.
 */
#include <cerrno>
#include <cstddef>
#include <cstdint>

#define HCASIM_EXPORT __attribute__((visibility("default")))

namespace {

int unsupported() {
  errno = EOPNOTSUPP;
  return -1;
}

void* unsupported_ptr() {
  errno = EOPNOTSUPP;
  return nullptr;
}

int unsupported_errno() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace

// A non-default versioned export: the C++ name is local (version script), the alias is exported.
#define HCASIM_COMPAT_1_0(ret, name) \
  extern "C" HCASIM_EXPORT __attribute__((symver(#name "@IBVERBS_1.0"))) ret hcasim_compat_1_0_##name

// ---------------------------------------------------------------------------------------------
// IBVERBS_1.0 compat ABI
// ---------------------------------------------------------------------------------------------

HCASIM_COMPAT_1_0(void*, ibv_get_device_list)(int* num_devices) {
  if (num_devices) *num_devices = 0;
  return unsupported_ptr();
}
HCASIM_COMPAT_1_0(void, ibv_free_device_list)(void*) {}
HCASIM_COMPAT_1_0(const char*, ibv_get_device_name)(void*) {
  return static_cast<const char*>(unsupported_ptr());
}
HCASIM_COMPAT_1_0(uint64_t, ibv_get_device_guid)(void*) {
  errno = EOPNOTSUPP;
  return 0;
}
HCASIM_COMPAT_1_0(void*, ibv_open_device)(void*) { return unsupported_ptr(); }
HCASIM_COMPAT_1_0(int, ibv_close_device)(void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_get_async_event)(void*, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(void, ibv_ack_async_event)(void*) {}
HCASIM_COMPAT_1_0(int, ibv_query_device)(void*, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_query_port)(void*, uint8_t, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_query_gid)(void*, uint8_t, int, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_query_pkey)(void*, uint8_t, int, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(void*, ibv_alloc_pd)(void*) { return unsupported_ptr(); }
HCASIM_COMPAT_1_0(int, ibv_dealloc_pd)(void*) { return unsupported(); }
HCASIM_COMPAT_1_0(void*, ibv_reg_mr)(void*, void*, size_t, int) { return unsupported_ptr(); }
HCASIM_COMPAT_1_0(int, ibv_dereg_mr)(void*) { return unsupported(); }
HCASIM_COMPAT_1_0(void*, ibv_create_cq)(void*, int, void*, void*, int) { return unsupported_ptr(); }
HCASIM_COMPAT_1_0(int, ibv_resize_cq)(void*, int) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_destroy_cq)(void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_get_cq_event)(void*, void*, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(void, ibv_ack_cq_events)(void*, unsigned int) {}
HCASIM_COMPAT_1_0(void*, ibv_create_srq)(void*, void*) { return unsupported_ptr(); }
HCASIM_COMPAT_1_0(int, ibv_modify_srq)(void*, void*, int) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_query_srq)(void*, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_destroy_srq)(void*) { return unsupported(); }
HCASIM_COMPAT_1_0(void*, ibv_create_qp)(void*, void*) { return unsupported_ptr(); }
HCASIM_COMPAT_1_0(int, ibv_query_qp)(void*, void*, int, void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_modify_qp)(void*, void*, int) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_destroy_qp)(void*) { return unsupported(); }
HCASIM_COMPAT_1_0(void*, ibv_create_ah)(void*, void*) { return unsupported_ptr(); }
HCASIM_COMPAT_1_0(int, ibv_destroy_ah)(void*) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_attach_mcast)(void*, const void*, uint16_t) { return unsupported(); }
HCASIM_COMPAT_1_0(int, ibv_detach_mcast)(void*, const void*, uint16_t) { return unsupported(); }

/// Pre-34 provider registration, exported only as ibv_register_driver@IBVERBS_1.1.
extern "C" HCASIM_EXPORT __attribute__((symver("ibv_register_driver@IBVERBS_1.1"))) void
hcasim_compat_1_1_ibv_register_driver(const char* name, void* init_func) {}

// ---------------------------------------------------------------------------------------------
// IBVERBS_PRIVATE_34
// ---------------------------------------------------------------------------------------------

extern "C" {

/// Read by the command helpers of the real library; a plain flag here.
HCASIM_EXPORT bool verbs_allow_disassociate_destroy = false;

/// Called from the constructor of every rdma-core provider library that gets loaded.
HCASIM_EXPORT void verbs_register_driver_34(const void* ops) {}

HCASIM_EXPORT void __verbs_log(void* ctx, uint32_t level, const char* fmt, ...) {}

HCASIM_EXPORT void* _verbs_init_and_alloc_context(void*, int, size_t, void*, uint32_t) {
  return unsupported_ptr();
}
HCASIM_EXPORT void* verbs_open_device(void*, void*) { return unsupported_ptr(); }
HCASIM_EXPORT void verbs_uninit_context(void*) {}
HCASIM_EXPORT void verbs_set_ops(void*, const void*) {}
HCASIM_EXPORT void verbs_init_cq(void*, void*, void*, void*) {}
HCASIM_EXPORT int ibv_read_ibdev_sysfs_file(char*, size_t, void*, const char*, ...) { return unsupported(); }
HCASIM_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void*) { return num_attrs; }
HCASIM_EXPORT int execute_ioctl(void*, void*) { return unsupported_errno(); }

// The ibv_cmd_* kernel-command helpers all return 0 or an errno value.
#define HCASIM_CMD_STUB(name) \
  HCASIM_EXPORT int name() { return unsupported_errno(); }

HCASIM_CMD_STUB(ibv_cmd_advise_mr)
HCASIM_CMD_STUB(ibv_cmd_alloc_dm)
HCASIM_CMD_STUB(ibv_cmd_alloc_mw)
HCASIM_CMD_STUB(ibv_cmd_alloc_pd)
HCASIM_CMD_STUB(ibv_cmd_attach_mcast)
HCASIM_CMD_STUB(ibv_cmd_close_xrcd)
HCASIM_CMD_STUB(ibv_cmd_create_ah)
HCASIM_CMD_STUB(ibv_cmd_create_counters)
HCASIM_CMD_STUB(ibv_cmd_create_cq)
HCASIM_CMD_STUB(ibv_cmd_create_cq_ex)
HCASIM_CMD_STUB(ibv_cmd_create_flow)
HCASIM_CMD_STUB(ibv_cmd_create_flow_action_esp)
HCASIM_CMD_STUB(ibv_cmd_create_qp)
HCASIM_CMD_STUB(ibv_cmd_create_qp_ex)
HCASIM_CMD_STUB(ibv_cmd_create_qp_ex2)
HCASIM_CMD_STUB(ibv_cmd_create_rwq_ind_table)
HCASIM_CMD_STUB(ibv_cmd_create_srq)
HCASIM_CMD_STUB(ibv_cmd_create_srq_ex)
HCASIM_CMD_STUB(ibv_cmd_create_wq)
HCASIM_CMD_STUB(ibv_cmd_dealloc_mw)
HCASIM_CMD_STUB(ibv_cmd_dealloc_pd)
HCASIM_CMD_STUB(ibv_cmd_dereg_mr)
HCASIM_CMD_STUB(ibv_cmd_destroy_ah)
HCASIM_CMD_STUB(ibv_cmd_destroy_counters)
HCASIM_CMD_STUB(ibv_cmd_destroy_cq)
HCASIM_CMD_STUB(ibv_cmd_destroy_flow)
HCASIM_CMD_STUB(ibv_cmd_destroy_flow_action)
HCASIM_CMD_STUB(ibv_cmd_destroy_qp)
HCASIM_CMD_STUB(ibv_cmd_destroy_rwq_ind_table)
HCASIM_CMD_STUB(ibv_cmd_destroy_srq)
HCASIM_CMD_STUB(ibv_cmd_destroy_wq)
HCASIM_CMD_STUB(ibv_cmd_detach_mcast)
HCASIM_CMD_STUB(ibv_cmd_free_dm)
HCASIM_CMD_STUB(ibv_cmd_get_context)
HCASIM_CMD_STUB(ibv_cmd_modify_cq)
HCASIM_CMD_STUB(ibv_cmd_modify_flow_action_esp)
HCASIM_CMD_STUB(ibv_cmd_modify_qp)
HCASIM_CMD_STUB(ibv_cmd_modify_qp_ex)
HCASIM_CMD_STUB(ibv_cmd_modify_srq)
HCASIM_CMD_STUB(ibv_cmd_modify_wq)
HCASIM_CMD_STUB(ibv_cmd_open_qp)
HCASIM_CMD_STUB(ibv_cmd_open_xrcd)
HCASIM_CMD_STUB(ibv_cmd_poll_cq)
HCASIM_CMD_STUB(ibv_cmd_post_recv)
HCASIM_CMD_STUB(ibv_cmd_post_send)
HCASIM_CMD_STUB(ibv_cmd_post_srq_recv)
HCASIM_CMD_STUB(ibv_cmd_query_context)
HCASIM_CMD_STUB(ibv_cmd_query_device_any)
HCASIM_CMD_STUB(ibv_cmd_query_mr)
HCASIM_CMD_STUB(ibv_cmd_query_port)
HCASIM_CMD_STUB(ibv_cmd_query_qp)
HCASIM_CMD_STUB(ibv_cmd_query_srq)
HCASIM_CMD_STUB(ibv_cmd_read_counters)
HCASIM_CMD_STUB(ibv_cmd_reg_dm_mr)
HCASIM_CMD_STUB(ibv_cmd_reg_dmabuf_mr)
HCASIM_CMD_STUB(ibv_cmd_reg_mr)
HCASIM_CMD_STUB(ibv_cmd_req_notify_cq)
HCASIM_CMD_STUB(ibv_cmd_rereg_mr)
HCASIM_CMD_STUB(ibv_cmd_resize_cq)

#undef HCASIM_CMD_STUB

}  // extern "C"
