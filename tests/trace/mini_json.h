// SPDX-License-Identifier: Apache-2.0
/**
 * @file mini_json.h
 * @brief A small strict JSON parser for the trace tests (RFC 8259 values; numbers as double).
 * parse() returns false with a position on any syntax error, so "the timeline is valid JSON" is
 * checked by the same code that reads it.
 */
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace minijson {

struct Value {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Value> arr;
  std::map<std::string, Value> obj;

  bool has(const std::string& k) const { return type == Object && obj.count(k) != 0; }
  const Value& operator[](const std::string& k) const {
    static const Value none;
    auto it = obj.find(k);
    return it == obj.end() ? none : it->second;
  }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  bool parse(Value& out, std::string& err) {
    ws();
    if (!value(out, 0)) {
      err = "JSON error at offset " + std::to_string(i_) + ": " + err_;
      return false;
    }
    ws();
    if (i_ != s_.size()) {
      err = "trailing characters at offset " + std::to_string(i_);
      return false;
    }
    return true;
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool fail(const char* m) {
    err_ = m;
    return false;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return fail("bad literal");
    i_ += n;
    return true;
  }
  bool string(std::string& out) {
    if (s_[i_] != '"') return fail("expected string");
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c < 0x20) return fail("control character in string");
      if (c == '\\') {
        if (++i_ >= s_.size()) return fail("truncated escape");
        switch (s_[i_]) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            if (i_ + 4 >= s_.size()) return fail("truncated \\u");
            unsigned v = unsigned(std::strtoul(s_.substr(i_ + 1, 4).c_str(), nullptr, 16));
            if (v < 0x80)
              out += char(v);
            else
              out += '?';
            i_ += 4;
            break;
          }
          default: return fail("bad escape");
        }
        ++i_;
      } else {
        out += char(c);
        ++i_;
      }
    }
    if (i_ >= s_.size()) return fail("unterminated string");
    ++i_;
    return true;
  }
  bool number(double& out) {
    size_t st = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) return fail("bad number");
    if (s_[i_] == '0' && i_ + 1 < s_.size() && isdigit(static_cast<unsigned char>(s_[i_ + 1])))
      return fail("leading zero");
    while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) return fail("bad fraction");
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) return fail("bad exponent");
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    out = std::strtod(s_.substr(st, i_ - st).c_str(), nullptr);
    return true;
  }
  bool value(Value& v, int depth) {
    if (depth > 64) return fail("too deep");
    if (i_ >= s_.size()) return fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') {
      v.type = Value::Object;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return true;
      }
      for (;;) {
        ws();
        std::string k;
        if (i_ >= s_.size() || !string(k)) return fail("expected key");
        ws();
        if (i_ >= s_.size() || s_[i_] != ':') return fail("expected ':'");
        ++i_;
        ws();
        Value x;
        if (!value(x, depth + 1)) return false;
        v.obj[k] = std::move(x);
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') {
          ++i_;
          return true;
        }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = Value::Array;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return true;
      }
      for (;;) {
        ws();
        Value x;
        if (!value(x, depth + 1)) return false;
        v.arr.push_back(std::move(x));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') {
          ++i_;
          return true;
        }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = Value::String;
      return string(v.str);
    }
    if (c == 't') {
      v.type = Value::Bool;
      v.b = true;
      return lit("true");
    }
    if (c == 'f') {
      v.type = Value::Bool;
      return lit("false");
    }
    if (c == 'n') return lit("null");
    v.type = Value::Number;
    return number(v.num);
  }

  const std::string& s_;
  size_t i_ = 0;
  std::string err_;
};

inline bool parse(const std::string& text, Value& out, std::string& err) {
  return Parser(text).parse(out, err);
}

}  // namespace minijson
