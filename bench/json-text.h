// SPDX-License-Identifier: LGPL-2.1-or-later
// JSON text for the small programs that write their results as JSON
// (the benchmarks, examples/gpufan-devices): a string literal, numbers and
// arrays of them, objects written field by field, and the file they go to.
// Header only; no JSON library is needed for so little.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gpufan_json {

// `text` as a JSON string literal, quotes included.
inline std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x",
                    static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// "[1.5, 2, 0.25]": 6 significant digits each.
inline std::string JsonNumbers(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    char number[32];
    std::snprintf(number, sizeof number, "%s%.6g", i > 0 ? ", " : "",
                  values[i]);
    out += number;
  }
  return out + "]";
}

// A number, 6 significant digits; null when it is not finite.
inline std::string JsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "[1.5, null, 0.25]": JsonNumber each (JsonNumbers writes no null).
inline std::string JsonArray(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + JsonNumber(v[i]);
  return s + "]";
}

// A JSON object written field by field.
class JsonObject {
 public:
  // `value`: JSON text already.
  JsonObject& Raw(const std::string& key, const std::string& value) {
    body_ += (body_.empty() ? "" : ", ") + JsonString(key) + ": " + value;
    return *this;
  }
  JsonObject& Str(const std::string& key, const std::string& v) {
    return Raw(key, JsonString(v));
  }
  JsonObject& Num(const std::string& key, double v) {
    return Raw(key, JsonNumber(v));
  }
  JsonObject& Bool(const std::string& key, bool v) {
    return Raw(key, v ? "true" : "false");
  }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

// An array of JSON texts, one a line, each after `indent`.
inline std::string JoinJson(const std::vector<std::string>& items,
                            const char *indent) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i)
    s += std::string(i ? "," : "") + "\n" + indent + items[i];
  return s + "]";
}

// `path` opened for writing; nullptr, the reason said on stderr, when it
// cannot be.
inline FILE *OpenJsonFile(const std::string& path) {
  FILE *out = std::fopen(path.c_str(), "w");
  if (out == nullptr)
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
  return out;
}

// Closes what OpenJsonFile(path) returned; false, the reason said on stderr,
// when a write or the close failed.
inline bool CloseJsonFile(FILE *out, const std::string& path) {
  const bool write_failed = std::ferror(out) != 0;
  if (std::fclose(out) != 0 || write_failed) {
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(),
                 write_failed ? "write error" : std::strerror(errno));
    return false;
  }
  return true;
}

// Writes `text` and a newline to `path`, and says so on stdout; false, the
// reason said on stderr, when it cannot.
inline bool WriteJsonFile(const std::string& path, const std::string& text) {
  FILE *out = OpenJsonFile(path);
  if (out == nullptr)
    return false;
  std::fprintf(out, "%s\n", text.c_str());
  if (!CloseJsonFile(out, path))
    return false;
  std::printf("wrote %s\n", path.c_str());
  return true;
}

}  // namespace gpufan_json
