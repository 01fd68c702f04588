/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prints every ibv_*_str text and rate conversion over a wide range of inputs. Built by
 * abi_symbols_test against the SYSTEM <infiniband/verbs.h> with -libverbs, then run once with
 * the system library and once with ours on LD_LIBRARY_PATH / LD_PRELOAD; outputs must match
 * from the second line on. The first line names the file that provided libibverbs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdio.h>

static const int kEdge[] = {INT_MIN, INT_MIN + 1, -1000, 1000, 65535, 65536, INT_MAX - 1, INT_MAX};

int main(void) {
  Dl_info info;
  if (dladdr((void*)&ibv_wc_status_str, &info) && info.dli_fname)
    printf("library %s\n", info.dli_fname);
  else
    printf("library ?\n");

  for (int i = -3; i < 64; ++i) {
    printf("wc_status %d %s\n", i, ibv_wc_status_str((enum ibv_wc_status)i));
    printf("node_type %d %s\n", i, ibv_node_type_str((enum ibv_node_type)i));
    printf("port_state %d %s\n", i, ibv_port_state_str((enum ibv_port_state)i));
    printf("event_type %d %s\n", i, ibv_event_type_str((enum ibv_event_type)i));
    printf("rate %d mult %d mbps %d\n", i, ibv_rate_to_mult((enum ibv_rate)i),
           ibv_rate_to_mbps((enum ibv_rate)i));
  }
  for (unsigned k = 0; k < sizeof(kEdge) / sizeof(kEdge[0]); ++k) {
    int v = kEdge[k];
    printf("edge %d: %s | %s | %s | %s | %d %d | %d %d\n", v, ibv_wc_status_str((enum ibv_wc_status)v),
           ibv_node_type_str((enum ibv_node_type)v), ibv_port_state_str((enum ibv_port_state)v),
           ibv_event_type_str((enum ibv_event_type)v), ibv_rate_to_mult((enum ibv_rate)v),
           ibv_rate_to_mbps((enum ibv_rate)v), (int)mult_to_ibv_rate(v), (int)mbps_to_ibv_rate(v));
  }

  /* Inverse conversions: every input up to 2,000,000, printing those that map to a rate. */
  long hits = 0;
  for (int v = -3; v <= 2000000; ++v) {
    enum ibv_rate m = mult_to_ibv_rate(v);
    enum ibv_rate b = mbps_to_ibv_rate(v);
    if (m != IBV_RATE_MAX) {
      printf("mult_to_ibv_rate %d %d\n", v, (int)m);
      ++hits;
    }
    if (b != IBV_RATE_MAX) {
      printf("mbps_to_ibv_rate %d %d\n", v, (int)b);
      ++hits;
    }
  }
  printf("inverse hits %ld\n", hits);
  return 0;
}
