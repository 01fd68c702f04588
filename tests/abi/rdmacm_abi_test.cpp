// SPDX-License-Identifier: Apache-2.0
/**
 * @file rdmacm_abi_test.cpp
 * @brief Our librdmacm.so.1 is a binary drop-in for Debian's rdma-core 44 library.
 *
 * - Every symbol\@version Debian's library exports is exported by ours with the same version,
 *   default status and kind, and ours exports nothing else; the version nodes (RDMACM_1.0 ...
 *   1.3) and their parents match; SONAME matches; ours needs libibverbs.so.1 (our drop-in).
 * - A C program built against the system <rdma/rdma_cma.h> with -lrdmacm prints the same
 *   rdma_event_str texts under both libraries, and under ours it makes and closes an rsocket
 *   and gets EBADF for a descriptor that is none.
 * - rdmacm-utils and perftest binaries start against our library (LD_LIBRARY_PATH, with
 *   LD_BIND_NOW so every symbol is resolved up front) without loader errors, and the loader
 *   really picked our librdmacm and our libibverbs.
 *
 * Paths come from CMake (tests/abi/CMakeLists.txt). Tests needing the system library or tools
 * are skipped without them; our library must be there.
 */
#include <gtest/gtest.h>

#include "elf_symbols.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef HCASIM_LIBRDMACM_PATH
#error "HCASIM_LIBRDMACM_PATH must name the built librdmacm.so.1"
#endif
#ifndef HCASIM_LIBIBVERBS_PATH
#error "HCASIM_LIBIBVERBS_PATH must name the built libibverbs.so.1"
#endif
#ifndef HCASIM_SYSTEM_LIBRDMACM_PATH
#error "HCASIM_SYSTEM_LIBRDMACM_PATH must name rdma-core's librdmacm.so.1 (or be empty: skipped)"
#endif
#ifndef HCASIM_OBJDUMP
#define HCASIM_OBJDUMP "objdump"
#endif
#ifndef HCASIM_C_COMPILER
#define HCASIM_C_COMPILER "cc"
#endif

namespace {

const std::string kOurs = HCASIM_LIBRDMACM_PATH;
const std::string kOurVerbs = HCASIM_LIBIBVERBS_PATH;
const std::string kSystem = HCASIM_SYSTEM_LIBRDMACM_PATH;

using namespace hcasim::abi;  // NOLINT: the helpers of elf_symbols.h

/// Values of one dynamic-section tag (SONAME, NEEDED) from objdump -p.
std::vector<std::string> dynamic_tag(const std::string& lib, const std::string& tag) {
  const RunResult r = run(std::string(HCASIM_OBJDUMP) + " -p " + quote(lib));
  std::vector<std::string> out;
  for (const std::string& line : lines_of(r.output)) {
    const std::vector<std::string> t = split_ws(line);
    if (t.size() == 2 && t[0] == tag) out.push_back(t[1]);
  }
  return out;
}

/// Sanitizer runtimes the library needs (sanitizer builds), to preload into plain programs.
std::string sanitizer_runtimes(const std::string& lib) {
  std::string out;
  for (const std::string& needed : dynamic_tag(lib, "NEEDED"))
    for (const char* rt : {"libasan.", "libtsan.", "libubsan.", "liblsan.", "libhwasan."})
      if (needed.rfind(rt, 0) == 0) out += (out.empty() ? "" : " ") + needed;
  return out;
}

/// The environment prefix that makes a program load our librdmacm (and our libibverbs).
std::string our_env() {
  const std::string san = sanitizer_runtimes(kOurs);
  std::string env = "env -u LD_PRELOAD LD_LIBRARY_PATH=" + quote(dir_of(kOurs));
  if (dir_of(kOurVerbs) != dir_of(kOurs)) env += ":" + quote(dir_of(kOurVerbs));
  if (!san.empty()) env += " ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD=" + quote(san);
  return env;
}

#define REQUIRE_OUR_LIBRARY() ASSERT_TRUE(exists(kOurs)) << "our librdmacm.so.1 is not built: " << kOurs

#define REQUIRE_SYSTEM_LIBRARY()                                                \
  do {                                                                          \
    if (!exists(kSystem)) GTEST_SKIP() << "system library absent: " << kSystem; \
  } while (0)

// -------------------------------------------------------------------------------------------
// Symbol table
// -------------------------------------------------------------------------------------------

TEST(RdmacmAbiSymbols, SonameAndLibibverbsDependency) {
  REQUIRE_OUR_LIBRARY();
  EXPECT_EQ(dynamic_tag(kOurs, "SONAME"), std::vector<std::string>{"librdmacm.so.1"});
  const auto needed = dynamic_tag(kOurs, "NEEDED");
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libibverbs.so.1"), needed.end())
      << "librdmacm.so.1 must sit on libibverbs.so.1, as rdma-core's does";
}

TEST(RdmacmAbiSymbols, EverySystemSymbolVersionIsExportedIdentically) {
  REQUIRE_SYSTEM_LIBRARY();
  REQUIRE_OUR_LIBRARY();
  const auto theirs = exported_symbols(kSystem);
  const auto ours = exported_symbols(kOurs);
  ASSERT_GE(theirs.size(), 72u) << "could not read " << kSystem;
  std::ostringstream msg;
  int bad = 0;
  for (const auto& [key, kind] : theirs) {
    const auto it = ours.find(key);
    if (it == ours.end()) {
      msg << "  missing " << key << "\n";
      ++bad;
    } else if (it->second != kind) {
      msg << "  wrong kind " << key << " (" << kind << " vs ours " << it->second << ")\n";
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << bad << " of " << theirs.size() << " differ:\n" << msg.str();
}

TEST(RdmacmAbiSymbols, NoExportsBeyondTheSystemLibrary) {
  REQUIRE_SYSTEM_LIBRARY();
  REQUIRE_OUR_LIBRARY();
  const auto theirs = exported_symbols(kSystem);
  std::ostringstream extra;
  int n = 0;
  for (const auto& [key, kind] : exported_symbols(kOurs)) {
    if (theirs.count(key)) continue;
    extra << "  " << key << "\n";
    ++n;
  }
  EXPECT_EQ(n, 0) << n << " unexpected exports:\n" << extra.str();
}

TEST(RdmacmAbiSymbols, VersionNodesAndParentsMatch) {
  REQUIRE_SYSTEM_LIBRARY();
  REQUIRE_OUR_LIBRARY();
  const auto theirs = version_nodes(kSystem);
  ASSERT_FALSE(theirs.empty());
  EXPECT_EQ(theirs.count("RDMACM_1.3"), 1u);
  EXPECT_EQ(version_nodes(kOurs), theirs);
}

// -------------------------------------------------------------------------------------------
// A C program built against the system headers and library
// -------------------------------------------------------------------------------------------

/// Prints the library that provided rdma_event_str, every event name, and (argv[1] == "ours")
/// what a few rsocket calls return.
const char kProbeSource[] = R"(#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char** argv) {
  Dl_info info;
  printf("library %s\n", dladdr((void*)&rdma_event_str, &info) && info.dli_fname ? info.dli_fname : "?");
  for (int i = -2; i < 24; ++i) printf("event %d %s\n", i, rdma_event_str((enum rdma_cm_event_type)i));
  if (argc > 1 && strcmp(argv[1], "ours") == 0) {
    errno = 0;
    int fd = rsocket(AF_INET, SOCK_STREAM, 0);
    printf("rsocket %s %d\n", fd >= 0 ? "fd" : "-1", fd >= 0 ? 0 : errno);
    errno = 0;
    int r = rclose(fd);
    printf("rclose %d %d\n", r, errno);
    errno = 0;
    r = rclose(fd);
    printf("rclose %d %d\n", r, errno);
    errno = 0;
    r = rpoll(NULL, 0, 0);
    printf("rpoll %d %d\n", r, errno);
  }
  return 0;
}
)";

class RdmacmProgram : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_SYSTEM_LIBRARY();
    REQUIRE_OUR_LIBRARY();
    char tmpl[] = "/tmp/hcasim_rdmacm_abi_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    src_ = dir_ + "/probe.c";
    exe_ = dir_ + "/probe";
    std::ofstream(src_) << kProbeSource;
    const RunResult cc = run(std::string(HCASIM_C_COMPILER) + " -std=gnu11 -O1 -o " + quote(exe_) + " " +
                             quote(src_) + " -lrdmacm -ldl");
    if (cc.status != 0) GTEST_SKIP() << "cannot build the C program (librdmacm-dev?):\n" << cc.output;
  }
  void TearDown() override {
    for (const std::string& f : {exe_, src_})
      if (!f.empty()) ::unlink(f.c_str());
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  std::string dir_, src_, exe_;
};

TEST_F(RdmacmProgram, SameEventNamesAndRsocketsWork) {
  const RunResult sys = run("env -u LD_LIBRARY_PATH -u LD_PRELOAD " + quote(exe_));
  ASSERT_EQ(sys.status, 0) << sys.output;
  const RunResult ours = run(our_env() + " " + quote(exe_) + " ours");
  ASSERT_EQ(ours.status, 0) << ours.output;
  const auto a = lines_of(sys.output), b = lines_of(ours.output);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(real_path(a[0].substr(a[0].find(' ') + 1)), real_path(kSystem)) << a[0];
  EXPECT_EQ(real_path(b[0].substr(b[0].find(' ') + 1)), real_path(kOurs)) << b[0];
  std::vector<std::string> sys_events(a.begin() + 1, a.end());
  std::vector<std::string> our_events, rsock;
  for (size_t i = 1; i < b.size(); ++i) (b[i].rfind("event ", 0) == 0 ? our_events : rsock).push_back(b[i]);
  EXPECT_EQ(our_events, sys_events);
  EXPECT_EQ(rsock, (std::vector<std::string>{"rsocket fd 0", "rclose 0 0",
                                             "rclose -1 " + std::to_string(EBADF), "rpoll 0 0"}));
}

// -------------------------------------------------------------------------------------------
// Unmodified binaries load against our library
// -------------------------------------------------------------------------------------------

/// Files the loader initialised whose base name starts with @p prefix, from LD_DEBUG=libs.
std::set<std::string> initialised(const std::string& ld_debug_output, const std::string& prefix) {
  std::set<std::string> libs;
  const std::string tag = "calling init: ";
  for (const std::string& line : lines_of(ld_debug_output)) {
    const auto pos = line.find(tag);
    if (pos == std::string::npos) continue;
    const std::string path = line.substr(pos + tag.size());
    if (path.substr(path.rfind('/') + 1).rfind(prefix, 0) == 0) libs.insert(real_path(path));
  }
  return libs;
}

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

struct Tool {
  const char* path;
  const char* args;
};

// Usage requests only: the point is the loader (LD_BIND_NOW resolves every symbol first).
const Tool kTools[] = {
    {"/usr/bin/rping", "-h"},           {"/usr/bin/ucmatose", "-h"},     {"/usr/bin/udaddy", "-h"},
    {"/usr/bin/mckey", "-h"},           {"/usr/bin/rdma_server", "-h"},  {"/usr/bin/rdma_client", "-h"},
    {"/usr/bin/rdma_xserver", "-h"},    {"/usr/bin/rdma_xclient", "-h"}, {"/usr/bin/cmtime", "-h"},
    {"/usr/bin/rstream", "-h"},         {"/usr/bin/riostream", "-h"},    {"/usr/bin/ib_write_bw", "--help"},
    {"/usr/bin/ib_send_lat", "--help"},
};

TEST(RdmacmAbiLoad, ToolsStartAgainstOurLibrary) {
  REQUIRE_OUR_LIBRARY();
  const bool have_timeout = exists("/usr/bin/timeout");
  const char* const kLoaderErrors[] = {"symbol lookup error",    "undefined symbol",
                                       "version `RDMACM",        "version `IBVERBS",
                                       "not found (required by", "cannot open shared object"};
  int ran = 0;
  for (const Tool& tool : kTools) {
    if (!exists(tool.path)) continue;
    // Only programs that really use librdmacm prove anything here.
    const RunResult ldd = run("ldd " + quote(tool.path));
    if (ldd.output.find("librdmacm.so.1") == std::string::npos) continue;
    SCOPED_TRACE(tool.path);
    const RunResult r =
        run(our_env() + " LD_BIND_NOW=1 LD_DEBUG=libs " + (have_timeout ? "timeout 60 " : "") + tool.path +
            " " + tool.args + " </dev/null");
    ++ran;
    const std::string own = without_ld_debug(r.output);
    for (const char* e : kLoaderErrors)
      EXPECT_EQ(own.find(e), std::string::npos) << "loader error '" << e << "':\n" << clip(own);
    EXPECT_LT(r.status, 124) << "crashed or timed out:\n" << clip(own);
    EXPECT_EQ(initialised(r.output, "librdmacm.so"), std::set<std::string>{real_path(kOurs)});
    EXPECT_EQ(initialised(r.output, "libibverbs.so"), std::set<std::string>{real_path(kOurVerbs)});
  }
  if (ran == 0) GTEST_SKIP() << "neither rdmacm-utils nor perftest installed";
}

}  // namespace
