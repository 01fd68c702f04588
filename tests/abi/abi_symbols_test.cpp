// SPDX-License-Identifier: Apache-2.0
/**
 * @file abi_symbols_test.cpp
 * @brief Our libibverbs.so.1 is a binary drop-in for Debian's rdma-core 44 library.
 *
 * - Every symbol@version Debian's library exports is exported by ours, with the same version,
 *   the same default (@@) / non-default (@) status and the same kind (function / data), and
 *   ours exports nothing else; the version nodes and their parents match; SONAME matches.
 * - A C program built against the system <infiniband/verbs.h> with -libverbs prints the same
 *   ibv_*_str texts and rate conversions under our library as under the system one.
 * - ibverbs-utils and perftest binaries start against our library (LD_LIBRARY_PATH and
 *   LD_PRELOAD) without loader errors, and the loader really picked ours.
 *
 * Paths come from CMake (tests/abi/CMakeLists.txt). Tests needing the system library or
 * tools that are absent are skipped.
 */
#include <gtest/gtest.h>

#include "elf_symbols.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef HCASIM_LIBIBVERBS_PATH
#error "HCASIM_LIBIBVERBS_PATH must name the built libibverbs.so.1"
#endif
#ifndef HCASIM_SYSTEM_LIBIBVERBS_PATH
#error "HCASIM_SYSTEM_LIBIBVERBS_PATH must name rdma-core's libibverbs.so.1 (or be empty: skipped)"
#endif
#ifndef HCASIM_OBJDUMP
#define HCASIM_OBJDUMP "objdump"
#endif
#ifndef HCASIM_C_COMPILER
#define HCASIM_C_COMPILER "cc"
#endif

namespace {

const std::string kOurs = HCASIM_LIBIBVERBS_PATH;
const std::string kSystem = HCASIM_SYSTEM_LIBIBVERBS_PATH;

using namespace hcasim::abi;  // NOLINT: the helpers of elf_symbols.h

std::string soname(const std::string& lib) {
  const RunResult r = run(std::string(HCASIM_OBJDUMP) + " -p " + quote(lib));
  for (const std::string& line : lines_of(r.output)) {
    const std::vector<std::string> t = split_ws(line);
    if (t.size() == 2 && t[0] == "SONAME") return t[1];
  }
  return {};
}

/// Sanitizer runtimes our library needs (sanitizer builds): they must be preloaded into
/// uninstrumented programs, or the runtime refuses to start.
std::string sanitizer_runtimes(const std::string& lib) {
  const RunResult r = run(std::string(HCASIM_OBJDUMP) + " -p " + quote(lib));
  std::string out;
  for (const std::string& line : lines_of(r.output)) {
    const std::vector<std::string> t = split_ws(line);
    if (t.size() != 2 || t[0] != "NEEDED") continue;
    for (const char* rt : {"libasan.", "libtsan.", "libubsan.", "liblsan.", "libhwasan."})
      if (t[1].rfind(rt, 0) == 0) out += (out.empty() ? "" : " ") + t[1];
  }
  return out;
}

/// Environment prefixes that make a program use our library: {description, "env ..."}.
std::vector<std::pair<std::string, std::string>> our_library_envs() {
  const std::string san = sanitizer_runtimes(kOurs);
  const std::string san_env = san.empty() ? "" : " ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD=" + quote(san);
  return {
      {"LD_LIBRARY_PATH", "env -u LD_PRELOAD LD_LIBRARY_PATH=" + quote(dir_of(kOurs)) + san_env},
      {"LD_PRELOAD", "env -u LD_LIBRARY_PATH" +
                         std::string(san.empty() ? "" : " ASAN_OPTIONS=detect_leaks=0") +
                         " LD_PRELOAD=" + quote(san.empty() ? kOurs : san + " " + kOurs)},
  };
}

#define REQUIRE_SYSTEM_LIBRARY()                                                \
  do {                                                                          \
    if (!exists(kSystem)) GTEST_SKIP() << "system library absent: " << kSystem; \
  } while (0)

// -------------------------------------------------------------------------------------------
// Symbol table
// -------------------------------------------------------------------------------------------

TEST(AbiSymbols, OurLibraryIsBuiltWithTheRightSoname) {
  ASSERT_TRUE(exists(kOurs)) << kOurs;
  EXPECT_EQ(soname(kOurs), "libibverbs.so.1");
}

TEST(AbiSymbols, EverySystemSymbolVersionIsExportedIdentically) {
  REQUIRE_SYSTEM_LIBRARY();
  ASSERT_TRUE(exists(kOurs)) << kOurs;
  const auto theirs = exported_symbols(kSystem);
  const auto ours = exported_symbols(kOurs);
  ASSERT_GT(theirs.size(), 150u) << "could not read " << kSystem;

  std::vector<std::string> missing, wrong_kind;
  for (const auto& [key, kind] : theirs) {
    const auto it = ours.find(key);
    if (it == ours.end())
      missing.push_back(key);
    else if (it->second != kind)
      wrong_kind.push_back(key + " (" + kind + " vs ours " + it->second + ")");
  }
  std::ostringstream msg;
  for (const auto& m : missing) {
    // Point out a version/default-status mismatch rather than a plain absence.
    const std::string name = m.substr(0, m.find('@'));
    std::string have;
    for (const auto& [k, _] : ours)
      if (k.substr(0, k.find('@')) == name) have += " " + k;
    msg << "  missing " << m << (have.empty() ? "" : ", ours has:" + have) << "\n";
  }
  for (const auto& w : wrong_kind) msg << "  wrong kind " << w << "\n";
  EXPECT_TRUE(missing.empty() && wrong_kind.empty()) << missing.size() << " missing, " << wrong_kind.size()
                                                     << " of wrong kind (of " << theirs.size() << "):\n"
                                                     << msg.str();
}

TEST(AbiSymbols, NoExportsBeyondTheSystemLibrary) {
  REQUIRE_SYSTEM_LIBRARY();
  const auto theirs = exported_symbols(kSystem);
  const auto ours = exported_symbols(kOurs);
  std::vector<std::string> extra;
  for (const auto& [key, kind] : ours) {
    if (theirs.count(key)) continue;
    // Room for deliberate project-private exports in their own HCASIM_* version node.
    if (key.find("@HCASIM_") != std::string::npos || key.find("@@HCASIM_") != std::string::npos) continue;
    // Harmless linker-provided weak references never show here (they are *UND*).
    extra.push_back(key);
  }
  std::ostringstream msg;
  for (const auto& e : extra) msg << "  " << e << "\n";
  EXPECT_TRUE(extra.empty()) << extra.size() << " unexpected exports:\n" << msg.str();
}

TEST(AbiSymbols, VersionNodesAndParentsMatch) {
  REQUIRE_SYSTEM_LIBRARY();
  const auto theirs = version_nodes(kSystem);
  auto ours = version_nodes(kOurs);
  ASSERT_FALSE(theirs.empty());
  // The simulator's own interface lives in one extra node of its own (sim_control.h), and the
  // rdma_cm's kernel side, which the drop-in librdmacm calls, in another (hcasim/ucma.h).
  EXPECT_EQ(ours.erase("HCASIM_SIM_0.1"), 1u) << "HCASIM_SIM_0.1 node missing";
  EXPECT_EQ(ours.erase("HCASIM_UCMA_0.1"), 1u) << "HCASIM_UCMA_0.1 node missing";
  EXPECT_EQ(ours, theirs);
}

TEST(AbiSymbols, SimulatorNodeHoldsOnlyItsControlApi) {
  const auto ours = exported_symbols(kOurs);
  std::vector<std::string> in_node;
  for (const auto& [key, kind] : ours)
    if (key.find("HCASIM_SIM_0.1") != std::string::npos) in_node.push_back(key);
  ASSERT_FALSE(in_node.empty());
  for (const auto& k : in_node)
    EXPECT_TRUE(k.rfind("hcasim_sim_", 0) == 0 || k.rfind("sc_main@", 0) == 0 ||
                k.rfind("HCASIM_SIM_0.1@", 0) == 0)  // the node's own marker symbol
        << k;
}

TEST(AbiSymbols, UcmaNodeHoldsTheThreeKernelCalls) {
  const auto ours = exported_symbols(kOurs);
  std::set<std::string> in_node;
  for (const auto& [key, kind] : ours)
    if (key.find("HCASIM_UCMA_0.1") != std::string::npos && key.rfind("HCASIM_UCMA_0.1@", 0) != 0)
      in_node.insert(key.substr(0, key.find('@')));
  EXPECT_EQ(in_node, (std::set<std::string>{"hcasim_ucma_close", "hcasim_ucma_open", "hcasim_ucma_write"}));
}

// -------------------------------------------------------------------------------------------
// Strings and rates, through a C program built against the system library
// -------------------------------------------------------------------------------------------

class AbiStrings : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!exists(kSystem)) GTEST_SKIP() << "system library absent: " << kSystem;
#ifndef HCASIM_ABI_STRINGS_DUMP_SRC
    GTEST_SKIP() << "HCASIM_ABI_STRINGS_DUMP_SRC not defined";
#else
    char tmpl[] = "/tmp/hcasim_abi_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    exe_ = dir_ + "/abi_strings_dump";
    const RunResult cc = run(std::string(HCASIM_C_COMPILER) + " -std=gnu11 -O1 -o " + quote(exe_) + " " +
                             quote(HCASIM_ABI_STRINGS_DUMP_SRC) + " -libverbs -ldl");
    if (cc.status != 0) GTEST_SKIP() << "cannot build the C program:\n" << cc.output;
#endif
  }
  void TearDown() override {
    if (!exe_.empty()) ::unlink(exe_.c_str());
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }

  /// Output of the dump program with @p env prepended; first line (library path) split off.
  std::pair<std::string, std::string> dump(const std::string& env) {
    const RunResult r = run(env + " " + quote(exe_));
    EXPECT_EQ(r.status, 0) << r.output.substr(0, 2000);
    const auto nl = r.output.find('\n');
    if (nl == std::string::npos) return {r.output, ""};
    return {r.output.substr(0, nl), r.output.substr(nl + 1)};
  }

  std::string dir_, exe_;
};

TEST_F(AbiStrings, SameTextsAndRatesAsTheSystemLibrary) {
  const auto [sys_lib, sys_out] = dump("env -u LD_LIBRARY_PATH -u LD_PRELOAD");
  ASSERT_EQ(real_path(sys_lib.substr(sys_lib.find(' ') + 1)), real_path(kSystem)) << sys_lib;
  ASSERT_NE(sys_out.find("wc_status 5 Work Request Flushed Error"), std::string::npos);

  for (const auto& [how, env] : our_library_envs()) {
    SCOPED_TRACE(how);
    const auto [lib, out] = dump(env);
    EXPECT_EQ(real_path(lib.substr(lib.find(' ') + 1)), real_path(kOurs)) << lib;
    if (out == sys_out) continue;
    // Report the first differing lines rather than two 3000-line blobs.
    const auto a = lines_of(sys_out), b = lines_of(out);
    std::ostringstream diff;
    int shown = 0;
    for (size_t i = 0; i < std::max(a.size(), b.size()) && shown < 20; ++i) {
      const std::string& x = i < a.size() ? a[i] : "<none>";
      const std::string& y = i < b.size() ? b[i] : "<none>";
      if (x != y) {
        diff << "  system: " << x << "\n  ours:   " << y << "\n";
        ++shown;
      }
    }
    ADD_FAILURE() << "output differs (" << a.size() << " vs " << b.size() << " lines):\n" << diff.str();
  }
}

// -------------------------------------------------------------------------------------------
// Unmodified binaries load against our library
// -------------------------------------------------------------------------------------------

struct Tool {
  const char* path;
  const char* args;
};

// Only commands that do not need a device to get past start-up: the point is the loader.
const Tool kTools[] = {
    {"/usr/bin/ibv_devices", ""},           {"/usr/bin/ib_write_bw", "--help"},
    {"/usr/bin/ib_write_lat", "--help"},    {"/usr/bin/ib_send_bw", "--help"},
    {"/usr/bin/ib_send_lat", "--help"},     {"/usr/bin/ib_read_bw", "--help"},
    {"/usr/bin/ib_read_lat", "--help"},     {"/usr/bin/ib_atomic_bw", "--help"},
    {"/usr/bin/raw_ethernet_bw", "--help"},
};

/// The program's own output: @p text without the "   <pid>:\t..." lines LD_DEBUG adds.
std::string without_ld_debug(const std::string& text) {
  std::string out;
  for (const std::string& line : lines_of(text)) {
    const auto colon = line.find(':');
    const auto first = line.find_first_not_of(' ');
    const bool debug = colon != std::string::npos && first != std::string::npos && first < colon &&
                       line.find_first_not_of("0123456789", first) == colon;
    if (!debug) out += line + "\n";
  }
  return out;
}

std::string clip(const std::string& text) { return text.size() > 4000 ? text.substr(0, 4000) + "..." : text; }

/// Files the loader initialised whose name starts with "libibverbs.so", from LD_DEBUG=libs.
std::set<std::string> initialised_libibverbs(const std::string& ld_debug_output) {
  std::set<std::string> libs;
  const std::string tag = "calling init: ";
  for (const std::string& line : lines_of(ld_debug_output)) {
    const auto pos = line.find(tag);
    if (pos == std::string::npos) continue;
    const std::string path = line.substr(pos + tag.size());
    const auto base = path.substr(path.rfind('/') + 1);
    if (base.rfind("libibverbs.so", 0) == 0) libs.insert(real_path(path));
  }
  return libs;
}

TEST(AbiLoad, ToolsStartAgainstOurLibrary) {
  ASSERT_TRUE(exists(kOurs)) << kOurs;
  const bool have_timeout = exists("/usr/bin/timeout");
  const auto envs = our_library_envs();
  const char* const kLoaderErrors[] = {"symbol lookup error", "undefined symbol", "version `IBVERBS",
                                       "not found (required by", "cannot open shared object"};
  int ran = 0;
  for (const Tool& tool : kTools) {
    if (!exists(tool.path)) continue;
    for (const auto& [how, env] : envs) {
      SCOPED_TRACE(std::string(tool.path) + " under " + how);
      const RunResult r = run(env + " LD_DEBUG=libs " + (have_timeout ? "timeout 60 " : "") + tool.path +
                              " " + tool.args + " </dev/null");
      ++ran;
      // Real loader failures are reported on the program's stderr, not as LD_DEBUG lines
      // (which also show harmless probing, e.g. by sanitizer runtimes).
      const std::string own = without_ld_debug(r.output);
      for (const char* err : kLoaderErrors)
        EXPECT_EQ(own.find(err), std::string::npos) << "loader error '" << err << "':\n" << clip(own);
      EXPECT_LT(r.status, 124) << "crashed or timed out:\n" << clip(own);
      const auto libs = initialised_libibverbs(r.output);
      EXPECT_EQ(libs, std::set<std::string>{real_path(kOurs)})
          << "libibverbs objects initialised by the loader differ from ours";
    }
  }
  if (ran == 0) GTEST_SKIP() << "neither ibverbs-utils nor perftest installed";
}

}  // namespace
