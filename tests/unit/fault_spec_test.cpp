// SPDX-License-Identifier: Apache-2.0
// The --faults SPEC grammar (sim/trace/fault_spec.h): what parses into which clauses, and that
// every kind of bad spec is refused with a message naming the clause and what is valid.
#include "fault_spec.h"

#include <gtest/gtest.h>

namespace hcasim::sim {
namespace {

const std::vector<std::string> kHosts = {"hcasim0", "hcasim1", "hcasim2"};

FaultSpec parse_ok(const std::string& text) {
  FaultSpec s;
  std::string err;
  EXPECT_TRUE(s.parse(text, err, kHosts)) << text << ": " << err;
  return s;
}

std::string parse_err(const std::string& text) {
  FaultSpec s;
  std::string err;
  EXPECT_FALSE(s.parse(text, err, kHosts)) << text;
  EXPECT_TRUE(s.empty()) << text;
  return err;
}

TEST(FaultSpec, EmptyIsNoFaults) { EXPECT_TRUE(parse_ok("").empty()); }

TEST(FaultSpec, EveryFaultWithItsProbability) {
  const FaultSpec s = parse_ok("loss=0.02,duplicate=0.01,reorder=1e-3,corrupt=1,delay=2us..50us");
  ASSERT_EQ(s.clauses.size(), 5u);
  EXPECT_EQ(s.clauses[0].kind, FaultKind::Loss);
  EXPECT_DOUBLE_EQ(s.clauses[0].probability, 0.02);
  EXPECT_EQ(s.clauses[1].kind, FaultKind::Duplicate);
  EXPECT_EQ(s.clauses[2].kind, FaultKind::Reorder);
  EXPECT_DOUBLE_EQ(s.clauses[2].probability, 0.001);
  EXPECT_EQ(s.clauses[3].kind, FaultKind::Corrupt);
  EXPECT_DOUBLE_EQ(s.clauses[3].probability, 1.0);
  EXPECT_EQ(s.clauses[4].kind, FaultKind::Delay);
  EXPECT_EQ(s.clauses[4].delay_min_ps, 2'000'000u);
  EXPECT_EQ(s.clauses[4].delay_max_ps, 50'000'000u);
  for (const FaultClause& c : s.clauses) {
    EXPECT_EQ(c.host, FaultClause::kAny);
    EXPECT_EQ(c.qpn, FaultClause::kAny);
    EXPECT_EQ(c.dir, FaultDir::Both);
    EXPECT_EQ(c.op, FaultOp::Any);
  }
}

TEST(FaultSpec, DelayUnitsAndASingleValue) {
  const FaultSpec s = parse_ok("delay=500ns,delay=1.5ms..100ms");
  EXPECT_EQ(s.clauses[0].delay_min_ps, 500'000u);
  EXPECT_EQ(s.clauses[0].delay_max_ps, 500'000u);
  EXPECT_EQ(s.clauses[1].delay_min_ps, 1'500'000'000u);
  EXPECT_EQ(s.clauses[1].delay_max_ps, 100'000'000'000u);
}

TEST(FaultSpec, ScopesAfterAt) {
  const FaultSpec s = parse_ok("loss=0.05@host=1@dir=tx@qpn=0x11@op=read,corrupt=0.1@host=hcasim2@op=ack");
  ASSERT_EQ(s.clauses.size(), 2u);
  EXPECT_EQ(s.clauses[0].host, 1u);
  EXPECT_EQ(s.clauses[0].dir, FaultDir::Tx);
  EXPECT_EQ(s.clauses[0].qpn, 0x11u);
  EXPECT_EQ(s.clauses[0].op, FaultOp::Read);
  EXPECT_EQ(s.clauses[1].host, 2u);
  EXPECT_EQ(s.clauses[1].dir, FaultDir::Both);
  EXPECT_EQ(s.clauses[1].op, FaultOp::Ack);
}

TEST(FaultSpec, AScopeAfterACommaContinuesTheScopedClause) {
  const FaultSpec s = parse_ok("loss=0.05@qpn=0x11,host=0,dir=rx,duplicate=0.5");
  ASSERT_EQ(s.clauses.size(), 2u);
  EXPECT_EQ(s.clauses[0].qpn, 0x11u);
  EXPECT_EQ(s.clauses[0].host, 0u);
  EXPECT_EQ(s.clauses[0].dir, FaultDir::Rx);
  EXPECT_EQ(s.clauses[1].kind, FaultKind::Duplicate);
  EXPECT_EQ(s.clauses[1].host, FaultClause::kAny);
}

TEST(FaultSpec, EveryOpFamily) {
  const FaultSpec s =
      parse_ok("loss=0@op=send,loss=0@op=write,loss=0@op=read,loss=0@op=atomic,loss=0@op=ack");
  const FaultOp want[] = {FaultOp::Send, FaultOp::Write, FaultOp::Read, FaultOp::Atomic, FaultOp::Ack};
  ASSERT_EQ(s.clauses.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(s.clauses[i].op, want[i]);
}

TEST(FaultSpec, UnknownFaultListsTheValidOnes) {
  const std::string e = parse_err("loss=0.1,drop=0.2");
  EXPECT_NE(e.find("clause 'drop=0.2'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown fault 'drop'"), std::string::npos) << e;
  EXPECT_NE(e.find("loss=P, duplicate=P, reorder=P, corrupt=P"), std::string::npos) << e;
}

TEST(FaultSpec, BadProbabilities) {
  for (const char* bad : {"loss=", "loss", "loss=1.5", "loss=-0.1", "loss=+0.1", "loss=abc", "loss=0.1x",
                          "corrupt=nan", "duplicate=inf", "reorder=1e400"}) {
    const std::string e = parse_err(bad);
    EXPECT_NE(e.find(std::string("clause '") + bad + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("from 0 to 1"), std::string::npos) << e;
  }
}

TEST(FaultSpec, BadDelays) {
  for (const char* bad : {"delay=", "delay=5", "delay=5s", "delay=us", "delay=-2us", "delay=50us..2us",
                          "delay=2us..", "delay=..2us", "delay=101ms", "delay=2us..x"}) {
    const std::string e = parse_err(bad);
    EXPECT_NE(e.find(std::string("clause '") + bad + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("bad delay"), std::string::npos) << e;
    EXPECT_NE(e.find("ns, us or ms"), std::string::npos) << e;
  }
}

TEST(FaultSpec, BadScopes) {
  struct Case {
    const char* spec;
    const char* says;
  } cases[] = {
      {"loss=0.1@psn=3", "unknown scope 'psn' (host=H, dir=tx|rx, qpn=Q, op=send|write|read|atomic|ack)"},
      {"loss=0.1@host=3", "bad host '3' (hcasim0..hcasim2, or 0..2)"},
      {"loss=0.1@host=hcasim9", "bad host 'hcasim9'"},
      {"loss=0.1@host", "bad host ''"},
      {"loss=0.1@host=1@dir=up", "bad dir 'up' (tx or rx)"},
      {"loss=0.1@qpn=0x1000000", "bad qpn '0x1000000' (a 24-bit number)"},
      {"loss=0.1@qpn=-1", "bad qpn"},
      {"loss=0.1@op=cas", "bad op 'cas' (send, write, read, atomic or ack)"},
      {"loss=0.1@dir=tx", "dir= needs host="},
      {"loss=0.1@", "unknown scope ''"},
  };
  for (const Case& c : cases) {
    const std::string e = parse_err(c.spec);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.spec << " -> " << e;
    EXPECT_NE(e.find("clause '"), std::string::npos) << e;
  }
}

TEST(FaultSpec, EmptyClausesAndStrayScopes) {
  EXPECT_NE(parse_err("loss=0.1,").find("empty clause"), std::string::npos);
  EXPECT_NE(parse_err(",loss=0.1").find("empty clause"), std::string::npos);
  EXPECT_NE(parse_err("loss=0.1,,duplicate=0.1").find("empty clause"), std::string::npos);
  // A scope after a comma only continues a clause that already has one ('@'); alone it is no fault.
  EXPECT_NE(parse_err("loss=0.1,host=1").find("unknown fault 'host'"), std::string::npos);
  EXPECT_NE(parse_err("host=1").find("unknown fault 'host'"), std::string::npos);
}

TEST(FaultSpec, HostIndexWithoutNamesTakesAnyNumber) {
  FaultSpec s;
  std::string err;
  EXPECT_TRUE(s.parse("loss=0.1@host=7", err)) << err;
  EXPECT_EQ(s.clauses[0].host, 7u);
}

}  // namespace
}  // namespace hcasim::sim
