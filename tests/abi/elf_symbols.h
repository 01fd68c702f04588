// SPDX-License-Identifier: Apache-2.0
// What the ABI tests read from a shared library: its dynamic symbols and version nodes (objdump),
// plus the small process and path helpers they need. Shared by abi_symbols_test (libibverbs)
// and rdmacm_abi_test (librdmacm).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifndef HCASIM_OBJDUMP
#define HCASIM_OBJDUMP "objdump"
#endif

namespace hcasim::abi {

struct RunResult {
  int status = -1;  ///< exit code, or 128 + signal
  std::string output;
};

/// Runs a shell command with stderr merged into stdout.
inline RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  if (WIFEXITED(st))
    r.status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st))
    r.status = 128 + WTERMSIG(st);
  return r;
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

inline std::string real_path(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (!r) return path;
  std::string s(r);
  ::free(r);
  return s;
}

inline std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

inline std::vector<std::string> split_ws(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

/**
 * Defined dynamic symbols of a library: "name@@VER" (default version), "name@VER" (non-default)
 * or "name" (unversioned) -> 'F' function, 'O' data object, '?' other.
 */
inline std::map<std::string, char> exported_symbols(const std::string& lib) {
  const RunResult r = run(std::string(HCASIM_OBJDUMP) + " -T " + quote(lib));
  std::map<std::string, char> syms;
  if (r.status != 0) {
    ADD_FAILURE() << "objdump -T " << lib << " failed:\n" << r.output;
    return syms;
  }
  for (const std::string& line : lines_of(r.output)) {
    if (line.size() < 17 || line.find("*UND*") != std::string::npos) continue;
    if (line.find_first_not_of("0123456789abcdef") != 16) continue;  // not a symbol row
    const std::vector<std::string> t = split_ws(line);
    if (t.size() < 5) continue;
    const std::string& name = t[t.size() - 1];
    const std::string& ver = t[t.size() - 2];
    char kind = '?';
    for (size_t i = 1; i + 2 < t.size(); ++i) {
      if (t[i] == "DF") kind = 'F';
      if (t[i] == "DO") kind = 'O';
    }
    std::string key;
    if (ver.size() > 2 && ver.front() == '(' && ver.back() == ')')
      key = name + "@" + ver.substr(1, ver.size() - 2);
    else if (ver == "Base" || ver.empty())
      key = name;
    else
      key = name + "@@" + ver;
    syms[key] = kind;
  }
  return syms;
}

/// Version definitions (objdump -p): node name -> parent node ("" if none). Skips the base entry.
inline std::map<std::string, std::string> version_nodes(const std::string& lib) {
  const RunResult r = run(std::string(HCASIM_OBJDUMP) + " -p " + quote(lib));
  std::map<std::string, std::string> nodes;
  bool in_defs = false;
  std::string last;
  for (const std::string& line : lines_of(r.output)) {
    if (line.rfind("Version definitions:", 0) == 0) {
      in_defs = true;
      continue;
    }
    if (!in_defs) continue;
    if (line.empty() || line.rfind("Version References:", 0) == 0) break;
    const std::vector<std::string> t = split_ws(line);
    if (line[0] == '\t' || line[0] == ' ') {  // parent of the previous node
      if (!last.empty() && !t.empty()) nodes[last] = t[0];
      continue;
    }
    if (t.size() < 4) continue;
    const bool base = t[1] == "0x01";
    last = base ? std::string() : t[3];
    if (!base) nodes.emplace(last, "");
  }
  return nodes;
}

}  // namespace hcasim::abi
