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
  const std::string e = parse_err("loss=0.1,lose=0.2");
  EXPECT_NE(e.find("clause 'lose=0.2'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown fault 'lose'"), std::string::npos) << e;
  EXPECT_NE(e.find("loss=P, duplicate=P, reorder=P, corrupt=P"), std::string::npos) << e;
  EXPECT_NE(e.find("drop=psn:P@host=H"), std::string::npos) << e;
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

TEST(FaultSpec, LinkDownWindowsByNameOrIndex) {
  const FaultSpec s =
      parse_ok("link-down=hcasim1@10us..200us,loss=0.01,link-down=2@1.5ms,link-down=1@1ms..2s");
  ASSERT_EQ(s.link_downs.size(), 3u);
  ASSERT_EQ(s.clauses.size(), 1u);
  EXPECT_EQ(s.link_downs[0].host, 1u);
  EXPECT_EQ(s.link_downs[0].down_ps, 10'000'000u);
  EXPECT_EQ(s.link_downs[0].up_ps, 200'000'000u);
  EXPECT_EQ(s.link_downs[1].host, 2u);
  EXPECT_EQ(s.link_downs[1].down_ps, 1'500'000'000u);
  EXPECT_EQ(s.link_downs[1].up_ps, LinkDownClause::kForever);  // @T1 alone: down for good
  EXPECT_EQ(s.link_downs[2].up_ps, 2'000'000'000'000u);
  EXPECT_FALSE(s.empty());
  EXPECT_FALSE(parse_ok("link-down=0@0ns..1ns").empty());
}

TEST(FaultSpec, LinkDownTakesNoScopeAfterAComma) {
  // After a link-down a scope is not glued onto it (its '@' holds the times): it stands alone.
  EXPECT_NE(parse_err("link-down=hcasim1@10us..20us,host=1").find("clause 'host=1': unknown fault 'host'"),
            std::string::npos);
  // A scoped clause after a link-down keeps its own scopes.
  const FaultSpec s = parse_ok("link-down=1@10us..20us,loss=0.1@host=0,dir=tx");
  ASSERT_EQ(s.clauses.size(), 1u);
  EXPECT_EQ(s.clauses[0].dir, FaultDir::Tx);
}

TEST(FaultSpec, BadLinkDowns) {
  struct Case {
    const char* spec;
    const char* says;
  } cases[] = {
      {"link-down=hcasim1", "missing times (link-down=HOST@T1..T2"},
      {"link-down=hcasim1@", "missing times"},
      {"link-down=", "missing times"},
      {"link-down=hcasim7@10us..20us", "bad host 'hcasim7' (hcasim0..hcasim2, or 0..2)"},
      {"link-down=3@10us", "bad host '3'"},
      {"link-down=@10us", "bad host ''"},
      {"link-down=1@10", "bad down time '10' (a simulated time from the start of the run with its unit"},
      {"link-down=1@..20us", "bad down time ''"},
      {"link-down=1@10us..", "bad up time ''"},
      {"link-down=1@10us..x", "bad up time 'x'"},
      {"link-down=1@-1us..20us", "bad down time '-1us'"},
      {"link-down=1@2h", "bad down time '2h'"},
      {"link-down=1@3601s", "up to an hour"},
      {"link-down=1@200us..10us",
       "the link must come back after it goes down (T2 10us is not later than T1 200us)"},
      {"link-down=1@10us..10us", "T2 10us is not later than T1 10us"},
      {"link-down=1@10us..20us@host=1", "bad up time '20us@host=1'"},
      {"link-down=1@10us..50us,link-down=hcasim1@40us", "overlaps an earlier link-down of the same host"},
      {"link-down=1@10us,link-down=1@1s..2s", "overlaps"},
  };
  for (const Case& c : cases) {
    const std::string e = parse_err(c.spec);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.spec << " -> " << e;
    EXPECT_NE(e.find("clause 'link-down="), std::string::npos) << e;
  }
  // Windows of different hosts may overlap; back-to-back windows of one host too.
  EXPECT_EQ(
      parse_ok("link-down=1@10us..50us,link-down=2@20us..60us,link-down=1@50us..70us").link_downs.size(), 3u);
  // Seconds are for link times only: a delay stays within 100 ms.
  EXPECT_NE(parse_err("delay=1s").find("bad delay"), std::string::npos);
}

TEST(FaultSpec, ScriptedDropsAreDropRules) {
  const FaultSpec s = parse_ok("drop=psn:1002@host=0,loss=0.01,drop=psn:0x10@host=hcasim2@qpn=0x11@count=3");
  ASSERT_EQ(s.drops.size(), 2u);
  EXPECT_EQ(s.clauses.size(), 1u);
  EXPECT_FALSE(s.empty());
  EXPECT_EQ(s.drops[0].host, 0u);
  EXPECT_EQ(s.drops[0].psn, 1002u);
  EXPECT_EQ(s.drops[0].qpn, DropRule::kAny);
  EXPECT_EQ(s.drops[0].count, 1u);
  EXPECT_EQ(s.drops[1].host, 2u);
  EXPECT_EQ(s.drops[1].psn, 0x10u);
  EXPECT_EQ(s.drops[1].qpn, 0x11u);
  EXPECT_EQ(s.drops[1].count, 3u);
  // A scope after a comma continues the drop, as it does a scoped fault.
  const FaultSpec t = parse_ok("drop=psn:5@host=1,qpn=0x12,count=2");
  ASSERT_EQ(t.drops.size(), 1u);
  EXPECT_EQ(t.drops[0].qpn, 0x12u);
  EXPECT_EQ(t.drops[0].count, 2u);
  EXPECT_TRUE(parse_ok("drop=psn:5@host=1").clauses.empty());
}

TEST(FaultSpec, BadDrops) {
  struct Case {
    const char* spec;
    const char* says;
  } cases[] = {
      {"drop=0.1", "bad drop '0.1' (drop=psn:P@host=H"},
      {"drop=psn:5", "names no host"},
      {"drop=psn:x@host=1", "bad psn 'x'"},
      {"drop=psn:0x1000000@host=1", "(a 24-bit number)"},
      {"drop=psn:5@host=hcasim9", "bad host 'hcasim9'"},
      {"drop=psn:5@host=1@dir=rx", "drop takes host=, qpn= and count=, not 'dir=rx'"},
      {"drop=psn:5@host=1@count=0", "bad count '0'"},
      {"loss=0.1@host=1,count=2", "unknown scope 'count'"},
  };
  for (const Case& c : cases) {
    const std::string e = parse_err(c.spec);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.spec << " -> " << e;
    EXPECT_NE(e.find("clause '"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace hcasim::sim
