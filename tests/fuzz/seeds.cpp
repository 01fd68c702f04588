// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpora of the fuzz harnesses: valid inputs of every shape each parser knows,
// encoded with the same code the simulator uses (build_frame, the contract's set_* accessors,
// Address::bytes, the documented spec grammars), so that the fuzzer starts from deep inside
// the grammar. Run after a format change:  build/bin/fuzz_seeds tests/fuzz/corpus
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hcasim/hca_hw.h"
#include "hcasim/verbs/address.h"
#include "protocol.h"
#include "roce_packet.h"
#include "store_tcp_protocol.h"

using namespace hcasim;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void frame(const fs::path& dir, const std::string& name, wire::Headers h, size_t payload_len) {
  std::vector<uint8_t> payload(payload_len);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = uint8_t(i * 7 + 1);
  std::vector<uint8_t> out(wire::frame_length(h, payload_len));
  const size_t n = wire::build_frame(h, payload.data(), payload_len, out.data(), out.size());
  out.resize(n);
  write(dir, name, out);
}

void frames(const fs::path& dir) {
  wire::Headers h;
  uint8_t sgid[16], dgid[16];
  wire::ipv4_to_gid(0xc0000201, sgid);
  wire::ipv4_to_gid(0xc0000202, dgid);
  wire::set_l3_from_gids(h, sgid, dgid);
  h.dest_qp = 0x010011;
  h.psn = 1000;
  h.ackreq = true;
  frame(dir, "send_only", h, 64);
  h.opcode = wire::BthOpcode::RDMA_WRITE_FIRST;
  h.reth = {0x7f0000001000, 0x1234, 9000};
  frame(dir, "write_first", h, 4096);
  h.opcode = wire::BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
  h.imm_data = 0x78563412;
  frame(dir, "write_only_imm", h, 13);
  h.opcode = wire::BthOpcode::RDMA_READ_REQUEST;
  frame(dir, "read_request", h, 0);
  h.opcode = wire::BthOpcode::RDMA_READ_RESPONSE_ONLY;
  h.aeth = {0, 5};
  frame(dir, "read_response", h, 100);
  h.opcode = wire::BthOpcode::ACKNOWLEDGE;
  h.aeth = {0x60, 6};  // a NAK: PSN sequence error
  frame(dir, "nak", h, 0);
  h.opcode = wire::BthOpcode::COMPARE_SWAP;
  h.atomic_eth = {0x7f0000002000, 0x99, 5, 4};
  frame(dir, "compare_swap", h, 0);
  h.opcode = wire::BthOpcode::SEND_ONLY_WITH_INVALIDATE;
  h.ieth_rkey = 0x4403;
  frame(dir, "send_inv", h, 8);
  h.opcode = wire::in_transport(wire::BthOpcode::SEND_ONLY, wire::Transport::UD);
  h.deth = {0x11111111, 0x010012};
  frame(dir, "ud_send", h, 256);
  h.opcode = wire::in_transport(wire::BthOpcode::SEND_ONLY, wire::Transport::XRC);
  h.xrc_srqn = 3;
  frame(dir, "xrc_send", h, 32);
  wire::ipv4_to_gid(0, sgid);
  sgid[0] = 0xfe, sgid[1] = 0x80, dgid[0] = 0xfe, dgid[1] = 0x80;  // IPv6 link-local GIDs
  wire::set_l3_from_gids(h, sgid, dgid);
  h.opcode = wire::BthOpcode::SEND_LAST;
  frame(dir, "ipv6_send_last", h, 21);
}

void wqe(const fs::path& dir, const std::string& name, uint8_t type, hw::WqeOpcode op,
         const std::vector<std::vector<uint8_t>>& segs) {
  std::vector<uint8_t> b(1 + (1 + segs.size()) * hw::kSegmentSize, 0);
  b[0] = type;
  hw::CtrlSeg c;
  hw::set_ctrl_seg(c, 3, op, 0x11, uint32_t(1 + segs.size()), hw::kCtrlCqUpdate, 0);
  std::memcpy(&b[1], &c, sizeof c);
  for (size_t i = 0; i < segs.size(); ++i)
    std::memcpy(&b[1 + (1 + i) * hw::kSegmentSize], segs[i].data(), segs[i].size());
  write(dir, name, b);
}

template <class Seg>
std::vector<uint8_t> seg_bytes(const Seg& s) {
  std::vector<uint8_t> v(sizeof s);
  std::memcpy(v.data(), &s, sizeof s);
  return v;
}

std::vector<std::vector<uint8_t>> split(const std::vector<uint8_t>& v) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < v.size(); i += hw::kSegmentSize)
    out.emplace_back(v.begin() + long(i), v.begin() + long(std::min(v.size(), i + hw::kSegmentSize)));
  return out;
}

void wqes(const fs::path& dir) {
  hw::DataSeg d;
  hw::set_data_seg(d, 0x7f0000001000, 64, 0x1234);
  hw::RaddrSeg r;
  hw::set_raddr_seg(r, 0x7f0000009000, 0x4321);
  hw::AtomicSeg a;
  hw::set_atomic_seg(a, 1, 0);
  wqe(dir, "send_one_sge", 0, hw::WqeOpcode::Send, {seg_bytes(d)});
  wqe(dir, "send_three_sges", 0, hw::WqeOpcode::Send, {seg_bytes(d), seg_bytes(d), seg_bytes(d)});
  wqe(dir, "write", 0, hw::WqeOpcode::RdmaWrite, {seg_bytes(r), seg_bytes(d)});
  wqe(dir, "fetch_add", 0, hw::WqeOpcode::AtomicFetchAdd, {seg_bytes(r), seg_bytes(a), seg_bytes(d)});
  std::vector<uint8_t> in(hw::inline_segments(20) * hw::kSegmentSize, 0x5a);
  hw::InlineSeg is;
  hw::set_inline_seg(is, 20);
  std::memcpy(in.data(), &is, sizeof is);
  wqe(dir, "send_inline", 0, hw::WqeOpcode::Send, split(in));
  hw::DatagramSeg ds;
  hw::set_datagram_seg(ds, hw::DatagramAddr{});
  auto ud = split(seg_bytes(ds));
  ud.push_back(seg_bytes(d));
  wqe(dir, "ud_send", 1, hw::WqeOpcode::Send, ud);
  hw::XrcSeg x;
  hw::set_xrc_seg(x, 2);
  wqe(dir, "xrc_send", 2, hw::WqeOpcode::Send, {seg_bytes(x), seg_bytes(d)});
  hw::BindSeg bs;
  hw::set_bind_seg(bs, hw::BindInfo{});
  wqe(dir, "bind_mw", 0, hw::WqeOpcode::BindMw, split(seg_bytes(bs)));
}

void text(const fs::path& dir, const std::string& name, char grammar, const std::string& spec) {
  std::vector<uint8_t> b(1, uint8_t(grammar));
  b.insert(b.end(), spec.begin(), spec.end());
  write(dir, name, b);
}

void specs(const fs::path& dir) {
  text(dir, "filter_host_unit", 0, "host=hcasim1;unit=cq,eq");
  text(dir, "filter_kind_qpn", 0, "kind=pkt.tx,pkt.rx;qpn=0x11");
  text(dir, "filter_words", 1, "kind=cqe,eqe,arm,db,pkt;host=0,1");
  text(dir, "drop_one", 2, "host=1;psn=1007");
  text(dir, "drop_many", 2, "host=hcasim0;psn=0x3e8;qpn=0x010011;count=3|host=2;psn=5");
  text(dir, "faults_all", 3, "loss=0.02,duplicate=0.01,reorder=0.01,corrupt=0.01,delay=2us..50us");
  text(dir, "faults_scoped", 3, "loss=0.05@host=hcasim1@dir=tx@qpn=0x11,delay=3us@op=ack");
  text(dir, "faults_link_down", 3, "link-down=hcasim1@10us..200us,loss=0.01@host=0,dir=tx,link-down=2@1.5ms");
  text(dir, "faults_drop", 3, "drop=psn:1002@host=0,loss=0.01,drop=psn:0x10@host=hcasim2@qpn=0x11,count=3");
}

void addresses(const fs::path& dir) {
  verbs::Address a;
  a.qpn = 0x010011;
  a.psn = 4096;
  a.mtu = 5;
  a.global = true;
  wire::ipv4_to_gid(0xc0000201, a.gid.data());
  write(dir, "roce_ipv4", a.bytes());
  a.global = false;
  a.lid = 7;
  a.mtu = 3;
  write(dir, "ib_lid", a.bytes());
}

/** A fabric connection's stream (fabric_protocol_fuzz.cpp): HCAs per host, then datagrams. */
class Stream {
 public:
  explicit Stream(uint8_t hcas_per_host) : b_{uint8_t(hcas_per_host - 1)} {}
  template <class T>
  Stream& msg(fabric::MsgType t, const T* p, size_t n = sizeof(T), bool fd = false) {
    const fabric::MsgHeader h{t, uint32_t(n)};
    const size_t len = sizeof h + n;
    b_.push_back(fd ? 1 : 0);
    b_.push_back(uint8_t(len));
    b_.push_back(uint8_t(len >> 8));
    const auto* hp = reinterpret_cast<const uint8_t*>(&h);
    b_.insert(b_.end(), hp, hp + sizeof h);
    if (n) b_.insert(b_.end(), reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + n);
    return *this;
  }
  Stream& empty(fabric::MsgType t) { return msg<uint8_t>(t, nullptr, 0); }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

void fabric_protocol(const fs::path& dir) {
  using fabric::MsgType;
  const fabric::HelloMsg hello{fabric::kProtocolVersion, 1234, -1, 0, 0, 0};
  const fabric::DoorbellMsg sq{0, hw::kUarSqDoorbell, uint64_t(0x010011) << 32 | 1};
  const fabric::DoorbellMsg arm{0, hw::kUarCqArm, 1};
  const fabric::MapMsg map{0, 0, 0x100000, 0x7f0000001000, 8192};
  const fabric::WaitMsg wait{0};
  fabric::TraceMsg tr{};
  tr.kind = trace::TraceKind::Post;
  std::vector<uint8_t> trace(sizeof tr + 12);
  std::memcpy(trace.data(), &tr, sizeof tr);
  std::memcpy(trace.data() + sizeof tr, "post: SEND 1", 12);
  fabric::CommandMsg cmd{};
  // A host's life: HELLO (host 1 with one HCA: its QPNs are 0x01xxxx), doorbells, map, wait,
  // a trace line, a WAKE for doorbells left in the arena's ring, LEAVING.
  write(dir, "host_life",
        Stream(1)
            .msg(MsgType::Hello, &hello, sizeof hello, true)
            .msg(MsgType::Map, &map)
            .msg(MsgType::Command, &cmd)
            .msg(MsgType::Doorbell, &sq)
            .msg(MsgType::DoorbellSync, &arm)
            .msg(MsgType::DoorbellIrqs, &sq)
            .msg(MsgType::Wait, &wait)
            .msg(MsgType::Trace, trace.data(), trace.size())
            .msg(MsgType::Unmap, &map)
            .empty(MsgType::Wake)
            .empty(MsgType::Leaving)
            .bytes());
  const fabric::AttachMsg attach{2, 0x1234, 0};
  const fabric::DoorbellMsg sq2{1, hw::kUarSqDoorbell, uint64_t(0x050011) << 32};  // host 2, HCA 1 of 2
  write(
      dir, "attach_thread",
      Stream(2).msg(MsgType::Attach, &attach).msg(MsgType::Doorbell, &sq2).msg(MsgType::Wait, &wait).bytes());
  fabric::ControlMsg ctl{};
  ctl.op = fabric::ControlOp::Counter;
  std::strcpy(ctl.device, "hcasim0");
  std::strcpy(ctl.name, "retransmits");
  write(dir, "cli",
        Stream(1).empty(MsgType::Status).msg(MsgType::Control, &ctl).empty(MsgType::Stop).bytes());
}

}  // namespace

/** A CQE of every opcode the HCA writes (with its flags), each followed by an EQE. */
void cqes(const fs::path& dir) {
  struct Case {
    const char* name;
    hw::CqeOpcode op;
    hw::CqeSyndrome syn;
    uint8_t flags;
    hw::WqeOpcode req;
    hw::EqeType eqe;
  };
  const Case cases[] = {
      {"req_write", hw::CqeOpcode::Req, hw::CqeSyndrome::Ok, 0, hw::WqeOpcode::RdmaWrite,
       hw::EqeType::Completion},
      {"req_read_err", hw::CqeOpcode::ReqErr, hw::CqeSyndrome::RemoteAccessErr, 0, hw::WqeOpcode::RdmaRead,
       hw::EqeType::WqAccessError},
      {"resp_send_imm", hw::CqeOpcode::RespSendImm, hw::CqeSyndrome::Ok, hw::kCqeWithImm, hw::WqeOpcode::Nop,
       hw::EqeType::CommEstablished},
      {"resp_write_imm_srq", hw::CqeOpcode::RespWriteImm, hw::CqeSyndrome::Ok, hw::kCqeWithImm | hw::kCqeSrq,
       hw::WqeOpcode::Nop, hw::EqeType::SrqLimit},
      {"resp_send_inv", hw::CqeOpcode::RespSend, hw::CqeSyndrome::Ok, hw::kCqeWithInv, hw::WqeOpcode::Nop,
       hw::EqeType::CqError},
      {"resp_ud_grh", hw::CqeOpcode::RespSend, hw::CqeSyndrome::Ok, hw::kCqeGrh, hw::WqeOpcode::Nop,
       hw::EqeType::SqDrained},
      {"flush", hw::CqeOpcode::RespErr, hw::CqeSyndrome::WrFlushErr, 0, hw::WqeOpcode::Nop,
       hw::EqeType::PortChange},
  };
  for (const Case& c : cases) {
    hw::CqeFields f;
    f.opcode = c.op;
    f.syndrome = c.syn;
    f.flags = c.flags;
    f.req_opcode = c.req;
    f.qpn = 0x010011;
    f.src_qp = 0x11;
    f.byte_cnt = 4096;
    f.imm = 0x78563412;
    f.wqe_counter = 7;
    f.srqn = 3;
    f.timestamp_ns = 123456789;
    hw::Cqe cqe;
    hw::set_cqe(cqe, f, 1);
    hw::Eqe eqe;
    hw::set_eqe(eqe, c.eqe, 0x010011, 987654321, 1);
    std::vector<uint8_t> bytes(sizeof cqe + sizeof eqe);
    std::memcpy(bytes.data(), &cqe, sizeof cqe);
    std::memcpy(bytes.data() + sizeof cqe, &eqe, sizeof eqe);
    write(dir, c.name, bytes);
  }
}

/** Step-mode scripts: every command, good and bad arguments. */
void step_scripts(const fs::path& dir) {
  auto text = [&](const char* name, const std::string& s) {
    write(dir, name, std::vector<uint8_t>(s.begin(), s.end()));
  };
  text("step_continue", "s\ns\nc 3\nq\n");
  text("print_all",
       "p qp 0x11\np qp 0x10011 hcasim1\np bt 0x11 1\np cq 1\np srq 2 hcasim2\np eq 0\np mr 0x12a\np "
       "stats\ns\n");
  text("examine_next",
       "x wqe 0x11 0\nx rwqe 0x11 3 1\nx cqe 1 0 hcasim1\nx eqe 0 1\nn cqe\nn pkt\nn kind=fault\n");
  text("drop_help", "drop next\ndrop next hcasim1\ndrop next 2\nh\nhelp\ncontinue 1000000\n");
  text("errors",
       "next unit=req,kind=retransmit host=1\nnext qpn=0x11\nbogus\np qp\np qp zz\nx wqe\nx zz 1 2\n"
       "p qp 0x11 hcasim9\ndrop next 7\n");
}

/** TcpStore client streams: every op, in several piece sizes, an ADD that wraps, bad requests. */
void store_streams(const fs::path& dir) {
  using namespace verbs::tcp_store;
  auto b = [](const std::string& s) { return verbs::Bytes(s.begin(), s.end()); };
  std::vector<uint8_t> good = {7};  // pieces of 8 bytes
  for (const verbs::Bytes& f :
       {request_frame(kSet, {b("rank0"), b("address-bytes")}), request_frame(kGet, {b("rank0")}),
        request_frame(kGet, {b("nobody")}), request_frame(kCheck, {b("rank0"), b("rank1")}),
        request_frame(kAdd, {b("barrier"), i64Bytes(1)}),
        request_frame(kAdd, {b("barrier"), i64Bytes(INT64_MAX)}), request_frame(kDel, {b("rank0")}),
        request_frame(kCheck, {})})
    good.insert(good.end(), f.begin(), f.end());
  write(dir, "every_op", good);
  std::vector<uint8_t> bad = {0};  // one byte at a time
  for (const verbs::Bytes& f :
       {request_frame(kSet, {b("k")}), request_frame(9, {b("x")}), request_frame(kAdd, {b("k"), b("short")}),
        request_frame(kSet, {b("n"), b("12abc")}), request_frame(kAdd, {b("n"), i64Bytes(1)})})
    bad.insert(bad.end(), f.begin(), f.end());
  for (uint8_t x : std::vector<uint8_t>{0, 0, 0, 6, kGet, 0, 0, 0, 9, 'k'})
    bad.push_back(x);  // an argument past the end
  write(dir, "bad_requests", bad);
  write(dir, "zero_length_frame", {255, 0, 0, 0, 0, kGet});
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  frames(root / "roce_frame");
  wqes(root / "send_wqe");
  specs(root / "trace_filter");
  addresses(root / "verbs_address");
  cqes(root / "cqe");
  step_scripts(root / "step_script");
  store_streams(root / "tcp_store");
  fabric_protocol(root / "fabric_protocol");
  std::printf("seed corpora written under %s\n", argv[1]);
  return 0;
}
