/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file ucma.h
 * @brief The RDMA connection manager's kernel interface, as the drop-in libibverbs.so.1 exports
 *        it to the drop-in librdmacm.so.1 (version node HCASIM_UCMA_0.1).
 *
 * On Linux, librdmacm opens /dev/infiniband/rdma_cm and writes commands to it: a struct
 * rdma_ucm_cmd_hdr followed by the command's struct, both from the kernel's
 * <rdma/rdma_user_cm.h>; each command writes its answer through the user pointer its struct
 * carries (`response`). hcasim's "kernel" (the connection manager in driver/cm) lives in the
 * drop-in libibverbs, so these three calls stand in for open(2), write(2) and close(2) on that
 * device, with the same commands, structures and errno values. The descriptor is a real file
 * descriptor: poll(2) reports POLLIN while an event waits for RDMA_USER_CM_CMD_GET_EVENT, and
 * with O_NONBLOCK set (fcntl(2)) GET_EVENT fails with EAGAIN instead of waiting.
 */
#ifndef HCASIM_UCMA_H
#define HCASIM_UCMA_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Open an event channel (open("/dev/infiniband/rdma_cm")): a descriptor, or -1 and errno. */
int hcasim_ucma_open(void);
/**
 * @brief Run one command on channel @p fd (write(2) on the device): @p len bytes, a struct
 * rdma_ucm_cmd_hdr then its command. Returns @p len, or -1 and errno as the kernel's ucma does.
 */
ssize_t hcasim_ucma_write(int fd, const void* buf, size_t len);
/** @brief Close channel @p fd; ids still on it are destroyed, as when the kernel's file closes. */
int hcasim_ucma_close(int fd);

#ifdef __cplusplus
}
#endif

#endif /* HCASIM_UCMA_H */
