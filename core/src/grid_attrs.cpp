// The token-grid attributes of a capture entry (grid, grid_offset, grid_tokens): reading with validation,
// writing, and removing them.
#include <array>

#include "entry_attrs.h"
#include "hdf5_util.h"

namespace sparge::core {
namespace {

constexpr const char* kGridHelp =
    " — store grid as three integers [T, H, W] (int64; T = 1 for an image), grid_offset as the index of the "
    "first grid token, grid_tokens as \"qkv\", \"q\" or \"kv\" (captures/FORMAT.md), or use `sparge "
    "annotate`";

std::string readGridShape(hid_t attr, TokenGrid& g) {
  h5::Handle type = h5::datatype(H5Aget_type(attr));
  h5::Handle space = h5::dataspace(H5Aget_space(attr));
  if (!type || !space) return "attribute grid is unreadable" + std::string(kGridHelp);
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    return "attribute grid is not an integer array" + std::string(kGridHelp);
  hsize_t dims[1] = {0};
  if (H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) != 1 || dims[0] != 3)
    return "attribute grid must hold exactly three values" + std::string(kGridHelp);
  std::array<int64_t, 3> v{};
  if (H5Aread(attr, H5T_NATIVE_INT64, v.data()) < 0)
    return "attribute grid is unreadable" + std::string(kGridHelp);
  g.frames = v[0];
  g.height = v[1];
  g.width = v[2];
  return "";
}

}  // namespace

std::string readGridAttributes(hid_t group, EntryInfo& info) {
  const bool hasGrid = H5Aexists(group, "grid") > 0;
  const bool hasOffset = H5Aexists(group, "grid_offset") > 0;
  const bool hasTokens = H5Aexists(group, "grid_tokens") > 0;
  if (!hasGrid) {
    if (hasOffset || hasTokens)
      return std::string("attribute ") + (hasOffset ? "grid_offset" : "grid_tokens") +
             " without attribute grid" + kGridHelp;
    return "";
  }
  TokenGrid g;
  {
    h5::Handle attr = h5::attribute(H5Aopen(group, "grid", H5P_DEFAULT));
    if (!attr) return "attribute grid is unreadable" + std::string(kGridHelp);
    if (std::string p = readGridShape(attr.get(), g); !p.empty()) return p;
  }
  if (hasOffset) {
    h5::Handle attr = h5::attribute(H5Aopen(group, "grid_offset", H5P_DEFAULT));
    std::optional<int64_t> v = attr ? h5::readInteger(attr.get()) : std::nullopt;
    if (!v) return "attribute grid_offset is not a single integer" + std::string(kGridHelp);
    g.offset = *v;
  }
  if (hasTokens) {
    h5::Handle attr = h5::attribute(H5Aopen(group, "grid_tokens", H5P_DEFAULT));
    std::optional<std::string> s = attr ? h5::readString(attr.get()) : std::nullopt;
    if (!s) return "attribute grid_tokens is not a string" + std::string(kGridHelp);
    if (*s != "qkv" && *s != "q" && *s != "kv") return "attribute grid_tokens = \"" + *s + "\"" + kGridHelp;
    g.tokens = parseGridTokens(*s);
  }
  if (std::string p = gridProblem(g, info.tokensQ, info.tokensKV); !p.empty()) return p;
  info.grid = g;
  return "";
}

bool writeGridAttributes(hid_t group, const std::optional<TokenGrid>& grid) {
  for (const char* name : {"grid", "grid_offset", "grid_tokens"})
    if (H5Aexists(group, name) > 0 && H5Adelete(group, name) < 0) return false;
  if (!grid) return true;
  const hsize_t dims[1] = {3};
  const std::array<int64_t, 3> v{grid->frames, grid->height, grid->width};
  h5::Handle space = h5::dataspace(H5Screate_simple(1, dims, nullptr));
  h5::Handle attr =
      space ? h5::attribute(H5Acreate2(group, "grid", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT))
            : h5::Handle();
  bool ok = attr && H5Awrite(attr.get(), H5T_NATIVE_INT64, v.data()) >= 0;
  ok = ok && h5::writeInteger(group, "grid_offset", grid->offset);
  return ok && h5::writeString(group, "grid_tokens", toString(grid->tokens));
}

}  // namespace sparge::core
