// SPDX-License-Identifier: Apache-2.0
/**
 * @file ib_mad_dissect_test.cpp
 * @brief tshark reads the CM MADs of model/wire/ib_mad.h as InfiniBand CM, with our values.
 *
 * One RoCEv2 frame per CM message (UD SEND_ONLY to QP 1, DETH Q_Key 0x80010000, source QP 1,
 * the 256-byte MAD as payload) goes into a pcap; tshark must dissect each as a CM MAD of the
 * right attribute, read back the fields we encoded, and find nothing malformed and no expert
 * information. Wireshark 4.0 dissects REQ, REP, REJ, RTU, DREQ and DREP field by field; MRA,
 * SIDR_REQ and SIDR_REP only by name ("Dissector Not Implemented"), so for those the check is the
 * attribute and the MAD data bytes. Skipped when tshark is not installed.
 *
 * Not compared: REQ's flow labels and packet rates. Wireshark 4.0 reads bytes 88-90 (and
 * 132-134) of the REQ as a 3-byte item but masks it as a 4-byte one, so it shows the top 12
 * bits of the 20-bit flow label and 6 bits of byte 90 as the packet rate; the Linux kernel
 * (ibta_vol1_c12.h, cm_msgs.h) and iPXE put flow label 20 bits, 6 reserved, rate 6 bits in
 * bytes 88-91, which is what ib_mad_test pins.
 */
#include "ib_mad.h"
#include "pcap_writer.h"
#include "roce_packet.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tshark.h"

namespace hcasim::wire::mad {
namespace {

using hcasim::test::have_tshark;
using hcasim::test::run;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v(1);
  for (char c : s) {
    if (c == sep)
      v.emplace_back();
    else
      v.back() += c;
  }
  return v;
}

/// How tshark prints a BASE_HEX field of @p digits hex digits.
std::string hex(uint64_t v, int digits) {
  char b[32];
  std::snprintf(b, sizeof(b), "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return b;
}
/// How tshark prints an FT_BYTES field.
std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), "%02x", p[i]);
    s += b;
  }
  return s;
}
void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 3);
}

/// One frame: its MAD, and the tshark fields it must show.
struct Frame {
  uint8_t mad[kMadSize];
  bool ipv6 = false;
  std::vector<std::pair<std::string, std::string>> expect;
};

/// What every CM MAD must show: the header we wrote and the CM attribute's name.
void expect_header(Frame& f, uint64_t tid, uint16_t attr, const char* ws_name) {
  f.expect.push_back({"infiniband.mad.baseversion", "0x01"});
  f.expect.push_back({"infiniband.mad.mgmtclass", "0x07"});
  f.expect.push_back({"infiniband.mad.classversion", "0x02"});
  f.expect.push_back({"infiniband.mad.method", "0x03"});
  f.expect.push_back({"infiniband.mad.status", "0x0000"});
  f.expect.push_back({"infiniband.mad.transactionid", hex(tid, 16)});
  f.expect.push_back({"infiniband.mad.attributeid", hex(attr, 4)});
  f.expect.push_back({"infiniband.mad.attributemodifier", "0x00000000"});
  f.expect.push_back({"_ws.col.Info", std::string("CM: ") + ws_name});
  f.expect.push_back({"infiniband.mad.data", hex_bytes(f.mad + kMadHeaderSize, kCmDataSize)});
}

void set_path(PathInfo& p, bool ipv6, uint8_t salt) {
  p.local_lid = 0xffff;
  p.remote_lid = static_cast<uint16_t>(0x1200 + salt);
  if (ipv6) {
    const uint8_t s[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    const uint8_t d[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    std::memcpy(p.local_gid, s, 16);
    std::memcpy(p.remote_gid, d, 16);
  } else {
    ipv4_to_gid(0x0a000001, p.local_gid);
    ipv4_to_gid(0x0a000002, p.remote_gid);
  }
  p.flow_label = 0x12345;
  p.packet_rate = 0x2a;
  p.traffic_class = static_cast<uint8_t>(0x68 + salt);
  p.hop_limit = static_cast<uint8_t>(0x40 + salt);
  p.sl = static_cast<uint8_t>(3 + salt);
  p.subnet_local = salt == 0;
  p.local_ack_timeout = static_cast<uint8_t>(14 + salt);
}

Req make_req(uint64_t service_id, bool ipv6) {
  Req r;
  r.local_comm_id = 0x12345678;
  r.vendor_id = 0x0002c9;
  r.service_id = service_id;
  r.local_ca_guid = 0x0002c90300a1b2c3ull;
  r.local_qkey = 0x01020304;
  r.local_qpn = 0x000011;
  r.responder_resources = 0x10;
  r.local_eecn = 0x0a0b0c;
  r.initiator_depth = 0x08;
  r.remote_eecn = 0x0d0e0f;
  r.remote_cm_response_timeout = 20;
  r.transport_service_type = kTransportUc;
  r.end_to_end_flow_control = true;
  r.starting_psn = 0x001234;
  r.local_cm_response_timeout = 19;
  r.retry_count = 6;
  r.partition_key = 0xffff;
  r.path_mtu = 5;
  r.rdc_exists = true;
  r.rnr_retry_count = 7;
  r.max_cm_retries = 15;
  r.srq = true;
  r.extended_transport_type = 1;
  set_path(r.primary, ipv6, 0);
  set_path(r.alternate, ipv6, 1);
  fill(r.private_data, sizeof(r.private_data), 0x21);
  return r;
}

void expect_req_fields(Frame& f, const Req& r) {
  auto& e = f.expect;
  e.push_back({"infiniband.cm.req", hex(r.local_comm_id, 8)});
  e.push_back({"infiniband.cm.req.localcaguid", hex(r.local_ca_guid, 16)});
  e.push_back({"infiniband.cm.req.localqkey", hex(r.local_qkey, 8)});
  e.push_back({"infiniband.cm.req.localqpn", hex(r.local_qpn, 6)});
  e.push_back({"infiniband.cm.req.responderres", hex(r.responder_resources, 2)});
  e.push_back({"infiniband.cm.req.localeecn", hex(r.local_eecn, 6)});
  e.push_back({"infiniband.cm.req.initdepth", hex(r.initiator_depth, 2)});
  e.push_back({"infiniband.cm.req.remoteeecn", hex(r.remote_eecn, 6)});
  e.push_back({"infiniband.cm.req.remoteresptout", hex(r.remote_cm_response_timeout, 2)});
  e.push_back({"infiniband.cm.req.transpsvctype", hex(r.transport_service_type, 2)});
  e.push_back({"infiniband.cm.req.e2eflowctrl", hex(r.end_to_end_flow_control, 2)});
  e.push_back({"infiniband.cm.req.startpsn", hex(r.starting_psn, 6)});
  e.push_back({"infiniband.cm.req.localresptout", hex(r.local_cm_response_timeout, 2)});
  e.push_back({"infiniband.cm.req.retrcount", hex(r.retry_count, 2)});
  e.push_back({"infiniband.cm.req.pkey", hex(r.partition_key, 4)});
  e.push_back({"infiniband.cm.req.pppmtu", hex(r.path_mtu, 2)});
  e.push_back({"infiniband.cm.req.rdcexist", hex(r.rdc_exists, 2)});
  e.push_back({"infiniband.cm.req.rnrretrcount", hex(r.rnr_retry_count, 2)});
  e.push_back({"infiniband.cm.req.maxcmretr", hex(r.max_cm_retries, 2)});
  e.push_back({"infiniband.cm.req.srq", hex(r.srq, 2)});
  e.push_back({"infiniband.cm.req.ext_transport", hex(r.extended_transport_type, 2)});
  e.push_back({"infiniband.cm.req.prim_locallid", std::to_string(r.primary.local_lid)});
  e.push_back({"infiniband.cm.req.prim_remotelid", std::to_string(r.primary.remote_lid)});
  e.push_back({"infiniband.cm.req.prim_tfcclass", hex(r.primary.traffic_class, 2)});
  e.push_back({"infiniband.cm.req.prim_hoplim", hex(r.primary.hop_limit, 2)});
  e.push_back({"infiniband.cm.req.prim_sl", hex(r.primary.sl, 2)});
  e.push_back({"infiniband.cm.req.prim_subnetlocal", hex(r.primary.subnet_local, 2)});
  e.push_back({"infiniband.cm.req.prim_localacktout", hex(r.primary.local_ack_timeout, 2)});
  e.push_back({"infiniband.cm.req.alt_locallid", std::to_string(r.alternate.local_lid)});
  e.push_back({"infiniband.cm.req.alt_remotelid", std::to_string(r.alternate.remote_lid)});
  e.push_back({"infiniband.cm.req.alt_localgid", hex_bytes(r.alternate.local_gid, kGidSize)});
  e.push_back({"infiniband.cm.req.alt_remotegid", hex_bytes(r.alternate.remote_gid, kGidSize)});
  e.push_back({"infiniband.cm.req.alt_tfcclass", hex(r.alternate.traffic_class, 2)});
  e.push_back({"infiniband.cm.req.alt_hoplim", hex(r.alternate.hop_limit, 2)});
  e.push_back({"infiniband.cm.req.alt_sl", hex(r.alternate.sl, 2)});
  e.push_back({"infiniband.cm.req.alt_subnetlocal", hex(r.alternate.subnet_local, 2)});
  e.push_back({"infiniband.cm.req.alt_localacktout", hex(r.alternate.local_ack_timeout, 2)});
}

/// A REQ with a plain service ID: Wireshark shows the ServiceID and the private data as is.
Frame req_frame(uint64_t tid, bool ipv6) {
  Frame f;
  f.ipv6 = ipv6;
  const Req r = make_req(0x1122334455667788ull, ipv6);
  encode(r, tid, f.mad);
  expect_header(f, tid, 0x0010, "ConnectRequest");
  expect_req_fields(f, r);
  f.expect.push_back({"infiniband.cm.req.serviceid", hex(r.service_id, 16)});
  f.expect.push_back({"infiniband.cm.req.private", hex_bytes(r.private_data, sizeof(r.private_data))});
  if (ipv6) {
    f.expect.push_back({"infiniband.cm.req.prim_localgid", "fe80::1"});
    f.expect.push_back({"infiniband.cm.req.prim_remotegid", "fe80::2"});
  } else {
    f.expect.push_back({"infiniband.cm.req.prim_localgid_ipv4", "10.0.0.1"});
    f.expect.push_back({"infiniband.cm.req.prim_remotegid_ipv4", "10.0.0.2"});
  }
  return f;
}

/// A REQ as librdmacm sends it (IBTA annex A11): service ID 0x00000000010 6 PPPP (TCP port space),
/// private data starting with the IP CM header, which Wireshark decodes at the private data offset.
Frame rdma_cm_req_frame(uint64_t tid) {
  Frame f;
  Req r = make_req(0x0000000001064791ull, false);
  std::memset(r.private_data, 0, sizeof(r.private_data));
  r.private_data[0] = 0x00;  // IP CM major/minor version
  r.private_data[1] = 0x40;  // IP version 4
  r.private_data[2] = 0xc3;  // source port 0xc350
  r.private_data[3] = 0x50;
  ipv4_to_gid(0x0a000001, r.private_data + 4);   // source IP
  ipv4_to_gid(0x0a000002, r.private_data + 20);  // destination IP
  fill(r.private_data + 36, 56, 0x70);           // the consumer's own private data
  encode(r, tid, f.mad);
  expect_header(f, tid, 0x0010, "ConnectRequest");
  expect_req_fields(f, r);
  f.expect.push_back({"infiniband.cm.req.serviceid.protocol", "0x06"});
  f.expect.push_back({"infiniband.cm.req.serviceid.dport", "0x4791"});
  f.expect.push_back({"infiniband.cm.req.ip_cm.ipv", "0x04"});
  f.expect.push_back({"infiniband.cm.req.ip_cm.sport", "0xc350"});
  f.expect.push_back({"infiniband.cm.req.ip_cm.sip4", "10.0.0.1"});
  f.expect.push_back({"infiniband.cm.req.ip_cm.dip4", "10.0.0.2"});
  f.expect.push_back({"infiniband.cm.req.ip_cm.private", hex_bytes(r.private_data + 36, 56)});
  return f;
}

Frame rep_frame(uint64_t tid) {
  Frame f;
  Rep p;
  p.local_comm_id = 0x9abcdef0;
  p.remote_comm_id = 0x12345678;
  p.local_qkey = 0x05060708;
  p.local_qpn = 0x000012;
  p.vendor_id = 0x0002c9;  // in the bytes Wireshark calls reserved: must not leak into the QPN etc.
  p.local_eecn = 0x112233;
  p.starting_psn = 0x000777;
  p.responder_resources = 0x04;
  p.initiator_depth = 0x02;
  p.target_ack_delay = 17;
  p.failover_accepted = 1;
  p.end_to_end_flow_control = true;
  p.rnr_retry_count = 5;
  p.srq = true;
  p.local_ca_guid = 0x0002c90300d4e5f6ull;
  fill(p.private_data, sizeof(p.private_data), 0x31);
  encode(p, tid, f.mad);
  expect_header(f, tid, 0x0013, "ConnectReply");
  auto& e = f.expect;
  e.push_back({"infiniband.cm.rep", hex(p.local_comm_id, 8)});
  e.push_back({"infiniband.cm.rep.remotecommid", hex(p.remote_comm_id, 8)});
  e.push_back({"infiniband.cm.rep.localqkey", hex(p.local_qkey, 8)});
  e.push_back({"infiniband.cm.rep.localqpn", hex(p.local_qpn, 6)});
  e.push_back({"infiniband.cm.rep.localeecn", hex(p.local_eecn, 6)});
  e.push_back({"infiniband.cm.rep.startpsn", hex(p.starting_psn, 6)});
  e.push_back({"infiniband.cm.rep.respres", hex(p.responder_resources, 2)});
  e.push_back({"infiniband.cm.rep.initdepth", hex(p.initiator_depth, 2)});
  e.push_back({"infiniband.cm.rep.tgtackdelay", hex(p.target_ack_delay, 2)});
  e.push_back({"infiniband.cm.rep.failoveracc", hex(p.failover_accepted, 2)});
  e.push_back({"infiniband.cm.rep.e2eflowctrl", hex(p.end_to_end_flow_control, 2)});
  e.push_back({"infiniband.cm.rep.rnrretrcount", hex(p.rnr_retry_count, 2)});
  e.push_back({"infiniband.cm.rep.srq", hex(p.srq, 2)});
  e.push_back({"infiniband.cm.rep.reserved", "0x00"});
  e.push_back({"infiniband.cm.rep.localcaguid", hex(p.local_ca_guid, 16)});
  e.push_back({"infiniband.cm.rep.private", hex_bytes(p.private_data, sizeof(p.private_data))});
  return f;
}

Frame rej_frame(uint64_t tid) {
  Frame f;
  Rej j;
  j.local_comm_id = 0x9abcdef0;
  j.remote_comm_id = 0x12345678;
  j.message_rejected = static_cast<uint8_t>(RejectedMessage::Req);
  j.reject_info_length = 0;
  j.reason = static_cast<uint16_t>(RejReason::InvalidServiceId);
  fill(j.ari, sizeof(j.ari), 0x41);
  fill(j.private_data, sizeof(j.private_data), 0x51);
  encode(j, tid, f.mad);
  expect_header(f, tid, 0x0012, "ConnectReject");
  auto& e = f.expect;
  e.push_back({"infiniband.cm.rej.localcommid", hex(j.local_comm_id, 8)});
  e.push_back({"infiniband.cm.rej.remotecommid", hex(j.remote_comm_id, 8)});
  e.push_back({"infiniband.cm.rej.msgrej", "0x00"});
  e.push_back({"infiniband.cm.rej.rejinfolen", "0x00"});
  e.push_back({"infiniband.cm.rej.reason", "0x0008"});
  e.push_back({"infiniband.cm.rej.ari", hex_bytes(j.ari, sizeof(j.ari))});
  e.push_back({"infiniband.cm.rej.private", hex_bytes(j.private_data, sizeof(j.private_data))});
  return f;
}

/// A second REJ with the other bit fields at non-zero values.
Frame rej_consumer_frame(uint64_t tid) {
  Frame f;
  Rej j;
  j.local_comm_id = 1;
  j.remote_comm_id = 2;
  j.message_rejected = static_cast<uint8_t>(RejectedMessage::Rep);
  j.reject_info_length = 72;
  j.reason = static_cast<uint16_t>(RejReason::ConsumerReject);
  encode(j, tid, f.mad);
  expect_header(f, tid, 0x0012, "ConnectReject");
  f.expect.push_back({"infiniband.cm.rej.msgrej", "0x01"});
  f.expect.push_back({"infiniband.cm.rej.reserved0", "0x00"});
  f.expect.push_back({"infiniband.cm.rej.rejinfolen", hex(72, 2)});
  f.expect.push_back({"infiniband.cm.rej.reserved1", "0x00"});
  f.expect.push_back({"infiniband.cm.rej.reason", "0x001c"});
  return f;
}

Frame rtu_frame(uint64_t tid) {
  Frame f;
  Rtu u;
  u.local_comm_id = 0x12345678;
  u.remote_comm_id = 0x9abcdef0;
  fill(u.private_data, sizeof(u.private_data), 0x61);
  encode(u, tid, f.mad);
  expect_header(f, tid, 0x0014, "ReadyToUse");
  f.expect.push_back({"infiniband.cm.rtu.localcommid", hex(u.local_comm_id, 8)});
  f.expect.push_back({"infiniband.cm.rtu.remotecommid", hex(u.remote_comm_id, 8)});
  f.expect.push_back({"infiniband.cm.rtu.private", hex_bytes(u.private_data, sizeof(u.private_data))});
  return f;
}

Frame dreq_frame(uint64_t tid) {
  Frame f;
  Dreq q;
  q.local_comm_id = 0x12345678;
  q.remote_comm_id = 0x9abcdef0;
  q.remote_qpn_eecn = 0x000012;
  fill(q.private_data, sizeof(q.private_data), 0x71);
  encode(q, tid, f.mad);
  expect_header(f, tid, 0x0015, "DisconnectRequest");
  f.expect.push_back({"infiniband.cm.dreq.localcommid", hex(q.local_comm_id, 8)});
  f.expect.push_back({"infiniband.cm.dreq.remotecommid", hex(q.remote_comm_id, 8)});
  f.expect.push_back({"infiniband.cm.req.remoteqpneecn", hex(q.remote_qpn_eecn, 6)});
  f.expect.push_back({"infiniband.cm.dreq.private", hex_bytes(q.private_data, sizeof(q.private_data))});
  return f;
}

Frame drep_frame(uint64_t tid) {
  Frame f;
  Drep d;
  d.local_comm_id = 0x9abcdef0;
  d.remote_comm_id = 0x12345678;
  fill(d.private_data, sizeof(d.private_data), 0x81);
  encode(d, tid, f.mad);
  expect_header(f, tid, 0x0016, "DisconnectReply");
  f.expect.push_back({"infiniband.cm.drsp.localcommid", hex(d.local_comm_id, 8)});
  f.expect.push_back({"infiniband.cm.drsp.remotecommid", hex(d.remote_comm_id, 8)});
  f.expect.push_back({"infiniband.cm.drsp.private", hex_bytes(d.private_data, sizeof(d.private_data))});
  return f;
}

/// MRA and SIDR: named only by Wireshark 4.0; expect_header() compares the raw data bytes.
std::vector<Frame> named_only_frames(uint64_t tid) {
  std::vector<Frame> v(3);
  Mra m;
  m.local_comm_id = 0x9abcdef0;
  m.remote_comm_id = 0x12345678;
  m.message_mraed = static_cast<uint8_t>(MraedMessage::Req);
  m.service_timeout = 21;
  fill(m.private_data, sizeof(m.private_data), 0x91);
  encode(m, tid, v[0].mad);
  expect_header(v[0], tid, 0x0011, "MsgRcptAck");
  SidrReq s;
  s.request_id = 0x55;
  s.partition_key = 0xffff;
  s.service_id = 0x0000000001110000ull | 4791;  // RDMA CM UDP port space
  encode(s, tid + 1, v[1].mad);
  expect_header(v[1], tid + 1, 0x0017, "ServiceIDResReq");
  SidrRep r;
  r.request_id = 0x55;
  r.status = static_cast<uint8_t>(SidrStatus::Valid);
  r.qpn = 0x000013;
  r.service_id = s.service_id;
  r.qkey = 0x01234567;
  encode(r, tid + 1, v[2].mad);
  expect_header(v[2], tid + 1, 0x0018, "ServiceIDResReqResp");
  return v;
}

std::vector<Frame> all_frames() {
  std::vector<Frame> v;
  v.push_back(req_frame(0x0000000100000001ull, false));
  v.push_back(rdma_cm_req_frame(0x0000000100000002ull));
  for (Frame& f : named_only_frames(0x0000000100000003ull)) v.push_back(f);
  v.push_back(rej_frame(0x0000000100000005ull));
  v.push_back(rej_consumer_frame(0x0000000100000006ull));
  v.push_back(rep_frame(0x0000000100000001ull));  // a REP answers with the REQ's TID
  v.push_back(rtu_frame(0x0000000100000001ull));
  v.push_back(dreq_frame(0x0000000100000007ull));
  v.push_back(drep_frame(0x0000000100000007ull));
  v.push_back(req_frame(0x0000000100000008ull, true));
  return v;
}

/// The frame carrying @p f's MAD as RoCEv2 UD to the GSI QP.
std::vector<uint8_t> to_frame(const Frame& f, uint32_t psn) {
  Headers h;
  const uint8_t m1[6] = {0x02, 0, 0, 0, 0, 0x01};
  const uint8_t m2[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(h.src_mac, m1, 6);
  std::memcpy(h.dst_mac, m2, 6);
  uint8_t sgid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  uint8_t dgid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  if (!f.ipv6) {
    ipv4_to_gid(0x0a000001, sgid);
    ipv4_to_gid(0x0a000002, dgid);
  }
  set_l3_from_gids(h, sgid, dgid);
  h.opcode = BthOpcode::UD_SEND_ONLY;
  h.pkey = kDefaultPkey;
  h.dest_qp = kGsiQpn;
  h.psn = psn;
  h.deth.qkey = kGsiQkey;
  h.deth.src_qp = kGsiQpn;
  h.udp_sport = roce_udp_sport(kGsiQpn, kGsiQpn);
  std::vector<uint8_t> out(max_frame_length(4096));
  const size_t n = build_frame(h, f.mad, kMadSize, out.data(), out.size());
  out.resize(n);
  return out;
}

/// Every field any frame expects, plus the ones every frame is checked for.
std::vector<std::string> field_names(const std::vector<Frame>& frames) {
  std::vector<std::string> names = {
      "frame.number",          "frame.protocols",       "infiniband.bth.opcode", "infiniband.bth.destqp",
      "infiniband.deth.q_key", "infiniband.deth.srcqp", "_ws.malformed",         "_ws.expert"};
  for (const Frame& f : frames)
    for (const auto& e : f.expect) {
      bool seen = false;
      for (const auto& n : names) seen = seen || n == e.first;
      if (!seen) names.push_back(e.first);
    }
  return names;
}

/// Our own trace line for the frame's MAD, to name it in failures.
std::string describe_line(const Frame& f) {
  char b[160];
  describe(f.mad, kMadSize, b, sizeof(b));
  return b;
}

void check_row(const Frame& f, size_t number, const std::map<std::string, std::string>& got) {
  EXPECT_EQ(got.at("frame.number"), std::to_string(number));
  EXPECT_NE(got.at("frame.protocols")
                .find(f.ipv6 ? "eth:ethertype:ipv6:udp:infiniband" : "eth:ethertype:ip:udp:infiniband"),
            std::string::npos);
  EXPECT_EQ(got.at("infiniband.bth.opcode"), "100");  // UD SEND_ONLY
  EXPECT_EQ(got.at("infiniband.bth.destqp"), "0x000001");
  EXPECT_EQ(got.at("infiniband.deth.q_key"), "0x0000000080010000");
  EXPECT_EQ(got.at("infiniband.deth.srcqp"), "0x00000001");
  EXPECT_EQ(got.at("_ws.malformed"), "") << "malformed";
  EXPECT_EQ(got.at("_ws.expert"), "") << "expert information";
  for (const auto& e : f.expect) EXPECT_EQ(got.at(e.first), e.second) << e.first;
}

TEST(IbMadDissect, TsharkReadsEveryCmMessage) {
  if (!have_tshark()) GTEST_SKIP() << "tshark is not installed";
  const std::string path = ::testing::TempDir() + "hcasim_ib_mad_" + std::to_string(::getpid()) + ".pcap";
  const std::vector<Frame> frames = all_frames();
  {
    PcapWriter w(path);
    ASSERT_TRUE(w.is_open());
    for (size_t i = 0; i < frames.size(); ++i) {
      const std::vector<uint8_t> fr = to_frame(frames[i], static_cast<uint32_t>(i));
      ASSERT_FALSE(fr.empty());
      w.write(1'700'000'000'000'000'000ull + i * 1000, fr.data(), fr.size());
    }
    ASSERT_TRUE(w.close());
  }
  const std::vector<std::string> names = field_names(frames);
  std::string cmd = "tshark -r '" + path +
                    "' -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE -T fields -E separator='|'"
                    " -E occurrence=f";
  for (const auto& n : names) cmd += " -e " + n;
  std::istringstream lines(run(cmd + " 2>/dev/null"));
  std::string line;
  size_t row = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ASSERT_LT(row, frames.size()) << "extra line: " << line;
    SCOPED_TRACE("frame " + std::to_string(row + 1) + ": " + describe_line(frames[row]));
    const std::vector<std::string> cols = split(line, '|');
    ASSERT_EQ(cols.size(), names.size()) << line;
    std::map<std::string, std::string> got;
    for (size_t i = 0; i < names.size(); ++i) got[names[i]] = cols[i];
    check_row(frames[row], row + 1, got);
    ++row;
  }
  EXPECT_EQ(row, frames.size());
  if (HasFailure())
    std::printf("capture kept for inspection: %s\n", path.c_str());
  else
    std::remove(path.c_str());
}

}  // namespace
}  // namespace hcasim::wire::mad
