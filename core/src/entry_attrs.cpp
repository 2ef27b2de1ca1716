// The optional window and identity attributes of a capture entry: reading, validation, writing.
#include "entry_attrs.h"

#include <array>
#include <optional>

#include "hdf5_util.h"

namespace sparge::core {
namespace {

constexpr const char* kWindowHelp =
    " — store it as two integers [left, right] (int64; query i sees keys i-left ... i+right, -1 = "
    "unbounded; causal is right = 0), e.g. np.array([4095, 0], dtype=np.int64)";

// The attribute `name` of `group` when it exists; an invalid handle otherwise.
h5::Handle openAttribute(hid_t group, const char* name) {
  if (H5Aexists(group, name) <= 0) return h5::Handle();
  return h5::attribute(H5Aopen(group, name, H5P_DEFAULT));
}

std::string readWindow(hid_t group, EntryInfo& info) {
  h5::Handle attr = openAttribute(group, "window");
  if (!attr) return "";
  h5::Handle type = h5::datatype(H5Aget_type(attr.get()));
  h5::Handle space = h5::dataspace(H5Aget_space(attr.get()));
  if (!type || !space) return "attribute window is unreadable" + std::string(kWindowHelp);
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    return "attribute window is not an integer array" + std::string(kWindowHelp);
  hsize_t dims[1] = {0};
  if (H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) != 1 || dims[0] != 2)
    return "attribute window must hold exactly two values" + std::string(kWindowHelp);
  std::array<int64_t, 2> v{};
  if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
    // Read as int64, HDF5 would clamp values beyond 2^63 − 1 and show a wrong window.
    std::array<uint64_t, 2> u{};
    if (H5Aread(attr.get(), H5T_NATIVE_UINT64, u.data()) < 0)
      return "attribute window is unreadable" + std::string(kWindowHelp);
    for (size_t i = 0; i < 2; ++i) {
      if (u[i] > uint64_t(INT64_MAX))
        return "attribute window holds " + std::to_string(u[i]) + ", beyond the signed 64-bit range" +
               std::string(kWindowHelp);
      v[i] = int64_t(u[i]);
    }
  } else if (H5Aread(attr.get(), H5T_NATIVE_INT64, v.data()) < 0) {
    return "attribute window is unreadable" + std::string(kWindowHelp);
  }
  info.window = Window{v[0], v[1]};
  return windowProblem(info.window, info.causal);
}

// A string attribute, "" when absent; nullopt when present but not a single string.
std::optional<std::string> readText(hid_t group, const char* name) {
  if (H5Aexists(group, name) <= 0) return std::string();
  h5::Handle attr = h5::attribute(H5Aopen(group, name, H5P_DEFAULT));
  return attr ? h5::readString(attr.get()) : std::nullopt;
}

}  // namespace

std::string windowProblem(const Window& w, bool causal) {
  const std::string text = toString(w);
  if (w.left < -1 || w.right < -1)
    return "window " + text +
           " has a value below -1 — use -1 for an unbounded side, otherwise a key count >= 0";
  if (causal && w.right > 0)
    return "window " + text + " lets queries see " + std::to_string(w.right) +
           " keys ahead, but the entry is causal — use right = 0 (or -1) with causal = 1, or causal = 0";
  return "";
}

std::string kindProblem(const std::string& kind) {
  if (kind.empty() || kind == "self" || kind == "cross") return "";
  return "attribute kind = \"" + kind + "\" — use \"self\" (queries and keys from one sequence) or \"cross\"";
}

std::string readEntryExtras(hid_t group, EntryInfo& info) {
  if (std::string p = readWindow(group, info); !p.empty()) return p;
  struct Field {
    const char* name;
    std::string* out;
  };
  for (const Field& f :
       {Field{"module", &info.module}, Field{"kind", &info.kind}, Field{"stack", &info.stack}}) {
    std::optional<std::string> s = readText(group, f.name);
    if (!s) return std::string("attribute ") + f.name + " is not a string — store it as a str";
    *f.out = *s;
  }
  if (std::string p = kindProblem(info.kind); !p.empty()) return p;
  return readGridAttributes(group, info);
}

bool writeEntryExtras(hid_t group, const EntryInfo& info) {
  bool ok = true;
  if (info.window.bounded()) {
    const hsize_t dims[1] = {2};
    const std::array<int64_t, 2> v{info.window.left, info.window.right};
    h5::Handle space = h5::dataspace(H5Screate_simple(1, dims, nullptr));
    h5::Handle attr =
        space
            ? h5::attribute(H5Acreate2(group, "window", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT))
            : h5::Handle();
    ok = attr && H5Awrite(attr.get(), H5T_NATIVE_INT64, v.data()) >= 0;
  }
  if (!info.module.empty()) ok = ok && h5::writeString(group, "module", info.module);
  if (!info.kind.empty()) ok = ok && h5::writeString(group, "kind", info.kind);
  if (!info.stack.empty()) ok = ok && h5::writeString(group, "stack", info.stack);
  if (info.grid) ok = ok && writeGridAttributes(group, info.grid);
  return ok;
}

}  // namespace sparge::core
