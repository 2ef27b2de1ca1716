// Strict reading of JSON documents: every failure is a sparge::Error whose `where` names the source file and
// the JSON pointer of the value it rejects ("p.json:/groups/0/heads/3/cdfthreshd"). Parameter files and the
// GUI's evaluation reports read through it.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "sparge/core/error.h"

namespace sparge::core {

class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw Error(source_ + ":" + (path.empty() ? "/" : path), problem);
  }

  const nlohmann::json& member(const nlohmann::json& obj, const std::string& path,
                               const std::string& key) const {
    if (!obj.is_object()) fail(path, "expected a JSON object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(path + "/" + key, "missing key \"" + key + "\"");
    return *it;
  }
  // The member, or nullptr when the key is absent (a JSON null is a value: the caller decides).
  const nlohmann::json* optional(const nlohmann::json& obj, const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  double number(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number, got " + std::string(v.type_name()));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(path, "expected a finite number");
    return d;
  }
  double number(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    return number(member(obj, path, key), path + "/" + key);
  }
  int64_t integer(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    const nlohmann::json& v = member(obj, path, key);
    if (!v.is_number_integer())
      fail(path + "/" + key, "expected an integer, got " + std::string(v.type_name()));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(path + "/" + key, "integer out of range");
    return v.get<int64_t>();
  }
  bool boolean(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    const nlohmann::json& v = member(obj, path, key);
    if (!v.is_boolean()) fail(path + "/" + key, "expected true or false, got " + std::string(v.type_name()));
    return v.get<bool>();
  }
  std::string string(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, got " + std::string(v.type_name()));
    return v.get<std::string>();
  }
  std::string string(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    return string(member(obj, path, key), path + "/" + key);
  }

 private:
  std::string source_;
};

}  // namespace sparge::core
