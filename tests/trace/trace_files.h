// SPDX-License-Identifier: Apache-2.0
/**
 * @file trace_files.h
 * @brief Readers for the trace tests: files, the readable trace's lines, VCD, pcap records.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tracetest {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::vector<std::string> words(const std::string& line) {
  std::istringstream ss(line);
  std::vector<std::string> w;
  std::string x;
  while (ss >> x) w.push_back(x);
  return w;
}

/** @brief One line of the readable trace: time host unit event qpn, then the facts' words. */
struct TraceLine {
  std::string time, host, unit, event, qpn;
  std::vector<std::string> facts;
  std::string raw;
};

inline std::vector<TraceLine> trace_lines(const std::string& text) {
  std::vector<TraceLine> out;
  std::istringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto w = words(line);
    if (w.size() < 5) continue;
    TraceLine t{w[0], w[1], w[2], w[3], w[4], std::vector<std::string>(w.begin() + 5, w.end()), line};
    out.push_back(t);
  }
  return out;
}

/** @brief A packet as the trace's port pkt.tx line shows it. */
struct WirePacket {
  std::string host, opcode;
  uint32_t psn = 0;
  bool se = false;
};

inline std::vector<WirePacket> trace_packets(const std::vector<TraceLine>& lines) {
  std::vector<WirePacket> out;
  for (const TraceLine& l : lines) {
    if (l.unit != "port" || l.event != "pkt.tx" || l.facts.size() < 3) continue;
    WirePacket p;
    p.host = l.host;
    p.opcode = l.facts[1];
    p.psn = uint32_t(std::strtoul(l.facts[2].c_str() + 4, nullptr, 10));  // "psn=N"
    for (const auto& f : l.facts)
      if (f == "SE") p.se = true;
    out.push_back(p);
  }
  return out;
}

/** @brief A parsed VCD: declarations and every value change, checked for well-formedness. */
struct Vcd {
  struct Var {
    std::string scope, name, code;
    unsigned width = 0;
  };
  std::string timescale;
  std::vector<Var> vars;
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> changes;  ///< code -> (time, value)
  uint64_t last_time = 0;

  const Var* find(const std::string& full) const {  // "hcasim0.port.tx_busy"
    for (const Var& v : vars)
      if (v.scope + "." + v.name == full) return &v;
    return nullptr;
  }
  /** Value of a signal at the end (or "" if it never changed). */
  std::string final_value(const std::string& full) const {
    const Var* v = find(full);
    if (!v) return "";
    auto it = changes.find(v->code);
    return it == changes.end() || it->second.empty() ? "" : it->second.back().second;
  }

  bool parse(const std::string& text, std::string& err) {
    std::istringstream ss(text);
    std::vector<std::string> scope;
    std::string tok;
    bool defs = true, dumpvars = false;
    std::map<std::string, unsigned> width;
    uint64_t now = 0;
    bool have_time = false;
    while (ss >> tok) {
      if (defs) {
        if (tok == "$timescale") {
          std::string x;
          while (ss >> x && x != "$end") timescale += x;
        } else if (tok == "$scope") {
          std::string kind, name, end;
          ss >> kind >> name >> end;
          if (end != "$end") return (err = "bad $scope"), false;
          scope.push_back(name);
        } else if (tok == "$upscope") {
          std::string end;
          ss >> end;
          if (scope.empty() || end != "$end") return (err = "bad $upscope"), false;
          scope.pop_back();
        } else if (tok == "$var") {
          Var v;
          std::string type, end;
          ss >> type >> v.width >> v.code >> v.name;
          ss >> end;
          if (end != "$end") ss >> end;  // a [msb:lsb] range
          if (end != "$end" || v.width == 0 || scope.empty()) return (err = "bad $var " + v.name), false;
          if (width.count(v.code)) return (err = "duplicate code " + v.code), false;
          for (size_t i = 0; i < scope.size(); ++i) v.scope += (i ? "." : "") + scope[i];
          width[v.code] = v.width;
          vars.push_back(v);
        } else if (tok == "$enddefinitions") {
          std::string end;
          ss >> end;
          if (!scope.empty()) return (err = "unclosed $scope"), false;
          defs = false;
        } else if (tok[0] == '$') {
          std::string x;
          while (ss >> x && x != "$end") {
          }
        } else {
          return (err = "unexpected '" + tok + "' in the header"), false;
        }
        continue;
      }
      if (tok == "$dumpvars") {
        dumpvars = true;
        continue;
      }
      if (tok == "$end") {
        if (!dumpvars) return (err = "stray $end"), false;
        dumpvars = false;
        continue;
      }
      if (tok[0] == '#') {
        const uint64_t t = std::strtoull(tok.c_str() + 1, nullptr, 10);
        if (have_time && t < now) return (err = "time goes backwards at " + tok), false;
        now = t;
        have_time = true;
        last_time = t;
        continue;
      }
      std::string code, value;
      if (tok[0] == 'b' || tok[0] == 'B') {
        value = tok.substr(1);
        ss >> code;
      } else {
        value = tok.substr(0, 1);
        code = tok.substr(1);
      }
      auto w = width.find(code);
      if (w == width.end()) return (err = "change of undeclared code '" + code + "'"), false;
      if (value.empty() || value.size() > w->second) return (err = "value too wide for " + code), false;
      for (char c : value)
        if (c != '0' && c != '1' && c != 'x' && c != 'z') return (err = "bad value " + value), false;
      if (!have_time) return (err = "value change before any time"), false;
      changes[code].emplace_back(now, value);
    }
    if (defs) return (err = "no $enddefinitions"), false;
    return true;
  }
};

/** @brief Records of a classic pcap file (nanosecond or microsecond magic, little-endian). */
struct PcapRecord {
  uint64_t time_ns;
  std::vector<uint8_t> data;
};

inline bool read_pcap(const std::string& bytes, std::vector<PcapRecord>& out, std::string& err) {
  auto le32 = [&](size_t at) {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data() + at);
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  };
  if (bytes.size() < 24) return (err = "short pcap header"), false;
  const uint32_t magic = le32(0);
  if (magic != 0xa1b23c4d && magic != 0xa1b2c3d4) return (err = "bad pcap magic"), false;
  if (le32(20) != 1) return (err = "not LINKTYPE_ETHERNET"), false;
  size_t at = 24;
  while (at < bytes.size()) {
    if (at + 16 > bytes.size()) return (err = "truncated record header"), false;
    const uint64_t sec = le32(at), frac = le32(at + 4);
    const uint32_t incl = le32(at + 8), orig = le32(at + 12);
    if (incl != orig || at + 16 + incl > bytes.size()) return (err = "truncated record"), false;
    PcapRecord r;
    r.time_ns = sec * 1000000000ull + (magic == 0xa1b23c4d ? frac : frac * 1000);
    r.data.assign(bytes.begin() + long(at + 16), bytes.begin() + long(at + 16 + incl));
    out.push_back(std::move(r));
    at += 16 + incl;
  }
  return true;
}

}  // namespace tracetest
