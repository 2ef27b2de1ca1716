// A compact binary encoding for messages between ranks (same build on every rank, little-endian hosts):
// numbers as their bytes, strings and vectors with a length prefix.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace sparge::scaleout {

class WireWriter {
 public:
  template <class T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  void put(T v) { raw(&v, sizeof v); }
  void put(bool v) { put(uint8_t(v ? 1 : 0)); }
  void put(const std::string& s) {
    put(uint64_t(s.size()));
    raw(s.data(), s.size());
  }
  // Vectors of numbers in one copy.
  template <class T>
  requires std::is_arithmetic_v<T>
  void put(const std::vector<T>& v) {
    put(uint64_t(v.size()));
    raw(v.data(), v.size() * sizeof(T));
  }
  void raw(const void* data, size_t bytes) { out_.append(static_cast<const char*>(data), bytes); }

  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what WireWriter wrote; throws sparge::Error naming `source` when the data ends early or a
// length is impossible (a message from a different sparge version, or a damaged one).
class WireReader {
 public:
  WireReader(const std::string& data, std::string source) : data_(data), source_(std::move(source)) {}

  template <class T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  void get(T& v) { raw(&v, sizeof v); }
  void get(bool& v) {
    uint8_t b = 0;
    get(b);
    v = b != 0;
  }
  void get(std::string& s) {
    const size_t n = length(1);
    s.assign(data_.data() + at_, n);
    at_ += n;
  }
  template <class T>
  requires std::is_arithmetic_v<T>
  void get(std::vector<T>& v) {
    const size_t n = length(sizeof(T));
    v.resize(n);
    raw(v.data(), n * sizeof(T));
  }
  template <class T>
  T read() {
    T v{};
    get(v);
    return v;
  }
  void raw(void* out, size_t bytes);
  // A length prefix of elements of `elementBytes`, checked against what is left.
  size_t length(size_t elementBytes);
  bool atEnd() const { return at_ == data_.size(); }
  // Throws unless every byte was read (catches encoder/decoder drift).
  void expectEnd() const;

 private:
  const std::string& data_;
  std::string source_;
  size_t at_ = 0;
};

// Records: specialise WireFields<T> with
//   template <class S, class F> static void visit(S& v, F&& f) { f(v.a, v.b, ...); }
// listing every field once; putAny / getAny then encode T, vectors of T and optional T in both
// directions from that one list.
template <class T>
struct WireFields;

template <class T>
void putAny(WireWriter& w, const T& v);
template <class T>
void getAny(WireReader& r, T& v);

namespace detail {
template <class T>
struct IsVector : std::false_type {};
template <class T, class A>
struct IsVector<std::vector<T, A>> : std::true_type {};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
}  // namespace detail

template <class T>
void putAny(WireWriter& w, const T& v) {
  if constexpr (requires { w.put(v); }) {
    w.put(v);
  } else if constexpr (detail::IsVector<T>::value) {
    w.put(uint64_t(v.size()));
    for (const auto& x : v) putAny(w, x);
  } else if constexpr (detail::IsOptional<T>::value) {
    w.put(v.has_value());
    if (v) putAny(w, *v);
  } else {
    WireFields<T>::visit(v, [&](const auto&... f) { (putAny(w, f), ...); });
  }
}

template <class T>
void getAny(WireReader& r, T& v) {
  if constexpr (requires { r.get(v); }) {
    r.get(v);
  } else if constexpr (detail::IsVector<T>::value) {
    v.resize(r.length(1));
    for (auto& x : v) getAny(r, x);
  } else if constexpr (detail::IsOptional<T>::value) {
    v.reset();
    if (r.read<bool>()) getAny(r, v.emplace());
  } else {
    WireFields<T>::visit(v, [&](auto&... f) { (getAny(r, f), ...); });
  }
}

template <class T>
std::string encode(const T& value) {
  WireWriter w;
  putAny(w, value);
  return w.take();
}

// Throws sparge::Error naming `source` when `data` is not a complete encoding of a T.
template <class T>
T decode(const std::string& data, const std::string& source) {
  WireReader r(data, source);
  T value{};
  getAny(r, value);
  r.expectEnd();
  return value;
}

}  // namespace sparge::scaleout
