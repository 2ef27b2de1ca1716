// The orders in which a permutation visits a T × H × W token grid, including the generalized Hilbert
// ("gilbert") curve for sides of any size; the construction is described in docs/permutation.md.
#include <array>
#include <cstdlib>

#include "sparge/core/error.h"
#include "sparge/core/permutation.h"

namespace sparge::core {
namespace {

// A vector of the integer lattice: one of the axes that span a sub-cuboid of the curve, or a position.
struct Vec {
  int64_t x = 0, y = 0, z = 0;
  Vec operator+(const Vec& o) const { return {x + o.x, y + o.y, z + o.z}; }
  Vec operator-(const Vec& o) const { return {x - o.x, y - o.y, z - o.z}; }
  Vec operator-() const { return {-x, -y, -z}; }
};

int64_t sign(int64_t v) {
  return (v > 0) - (v < 0);
}
// Floor division by 2: the halving of a (possibly negative) axis must round down in every direction.
int64_t half(int64_t v) {
  return v >= 0 ? v / 2 : -((-v + 1) / 2);
}
Vec halfOf(const Vec& v) {
  return {half(v.x), half(v.y), half(v.z)};
}
Vec unit(const Vec& v) {
  return {sign(v.x), sign(v.y), sign(v.z)};
}
// The number of cells along an axis vector (axes are parallel to one coordinate axis).
int64_t length(const Vec& v) {
  return std::llabs(v.x + v.y + v.z);
}

// Appends the cells the curve visits, as (x, y, z) positions, through `emit`.
class Curve {
 public:
  Curve(int64_t sx, int64_t sy, std::vector<int64_t>& out) : sx_(sx), sy_(sy), out_(out) {}

  void line(Vec p, const Vec& dir, int64_t n) {
    for (int64_t i = 0; i < n; ++i, p = p + dir) emit(p);
  }

  // The rectangle spanned by a (the major axis, walked from p towards p + a) and b, entered at p and left
  // at the corner p + a − unit(a): the template splits it into up to three parts whose entries and exits
  // chain, making b's half even where it can so that the parts can be walked with unit steps.
  void rect(Vec p, Vec a, Vec b) {
    const int64_t w = length(a), h = length(b);
    const Vec da = unit(a), db = unit(b);
    if (h == 1) return line(p, da, w);
    if (w == 1) return line(p, db, h);
    Vec a2 = halfOf(a), b2 = halfOf(b);
    if (2 * w > 3 * h) {  // long rectangle: two halves along a
      if (length(a2) % 2 == 1 && w > 2) a2 = a2 + da;
      rect(p, a2, b);
      rect(p + a2, a - a2, b);
      return;
    }
    if (length(b2) % 2 == 1 && h > 2) b2 = b2 + db;
    rect(p, b2, a2);                                 // up
    rect(p + b2, a, b - b2);                         // across
    rect(p + (a - da) + (b2 - db), -b2, -(a - a2));  // down
  }

  // The cuboid spanned by a (major axis), b and c, entered at p and left at p + a − unit(a).
  void cuboid(Vec p, Vec a, Vec b, Vec c) {
    const int64_t w = length(a), h = length(b), d = length(c);
    const Vec da = unit(a), db = unit(b), dc = unit(c);
    if (h == 1 && d == 1) return line(p, da, w);
    if (w == 1 && d == 1) return line(p, db, h);
    if (w == 1 && h == 1) return line(p, dc, d);
    Vec a2 = halfOf(a), b2 = halfOf(b), c2 = halfOf(c);
    if (length(a2) % 2 == 1 && w > 2) a2 = a2 + da;
    if (length(b2) % 2 == 1 && h > 2) b2 = b2 + db;
    if (length(c2) % 2 == 1 && d > 2) c2 = c2 + dc;
    if (2 * w > 3 * h && 2 * w > 3 * d) {  // wide: two halves along a
      cuboid(p, a2, b, c);
      cuboid(p + a2, a - a2, b, c);
    } else if (3 * h > 4 * d) {  // flat in c: split a and b only
      cuboid(p, b2, c, a2);
      cuboid(p + b2, a, b - b2, c);
      cuboid(p + (a - da) + (b2 - db), -b2, c, -(a - a2));
    } else if (3 * d > 4 * h) {  // flat in b: split a and c only
      cuboid(p, c2, a2, b);
      cuboid(p + c2, a, b, c - c2);
      cuboid(p + (a - da) + (c2 - dc), -c2, -(a - a2), b);
    } else {  // split all three: the eight-octant Hilbert template, merged into five parts
      cuboid(p, b2, c2, a2);
      cuboid(p + b2, c, a2, b - b2);
      cuboid(p + (b2 - db) + (c - dc), a, -b2, -(c - c2));
      cuboid(p + (a - da) + b2 + (c - dc), -c, -(a - a2), b - b2);
      cuboid(p + (a - da) + (b2 - db), -b2, c2, -(a - a2));
    }
  }

 private:
  void emit(const Vec& p) { out_.push_back((p.z * sy_ + p.y) * sx_ + p.x); }

  int64_t sx_, sy_;
  std::vector<int64_t>& out_;
};

// The generalized Hilbert curve over an sx × sy × sz box (x fastest in the row-major index). Sides of 1
// reduce it to the 2-D curve over the other two (or a line), whose guarantees are stronger.
std::vector<int64_t> hilbertOrder(int64_t sx, int64_t sy, int64_t sz) {
  std::vector<int64_t> out;
  out.reserve(size_t(sx * sy * sz));
  Curve curve(sx, sy, out);
  // The non-trivial axes, x before y before z.
  std::array<Vec, 3> axes{};
  int n = 0;
  if (sx > 1) axes[n++] = Vec{sx, 0, 0};
  if (sy > 1) axes[n++] = Vec{0, sy, 0};
  if (sz > 1) axes[n++] = Vec{0, 0, sz};
  if (n == 0) {
    out.push_back(0);
  } else if (n == 1) {
    curve.line({}, unit(axes[0]), length(axes[0]));
  } else if (n == 2) {
    const Vec& a = axes[0];
    const Vec& b = axes[1];
    if (length(a) >= length(b))
      curve.rect({}, a, b);
    else
      curve.rect({}, b, a);
  } else if (sx >= sy && sx >= sz) {
    curve.cuboid({}, Vec{sx, 0, 0}, Vec{0, sy, 0}, Vec{0, 0, sz});
  } else if (sy >= sx && sy >= sz) {
    curve.cuboid({}, Vec{0, sy, 0}, Vec{sx, 0, 0}, Vec{0, 0, sz});
  } else {
    curve.cuboid({}, Vec{0, 0, sz}, Vec{sx, 0, 0}, Vec{0, sy, 0});
  }
  return out;
}

}  // namespace

std::vector<int64_t> gridOrder(int64_t frames, int64_t height, int64_t width, Permutation p) {
  if (frames < 1 || height < 1 || width < 1) throw Error("grid order", "grid sides must be at least 1");
  const int64_t n = frames * height * width;
  std::vector<int64_t> order;
  order.reserve(size_t(n));
  switch (p) {
    case Permutation::None:
    case Permutation::RowMajor:
      for (int64_t i = 0; i < n; ++i) order.push_back(i);
      break;
    case Permutation::TimeMajor:
      for (int64_t h = 0; h < height; ++h)
        for (int64_t w = 0; w < width; ++w)
          for (int64_t t = 0; t < frames; ++t) order.push_back((t * height + h) * width + w);
      break;
    case Permutation::Hilbert:
      order = hilbertOrder(width, height, frames);
      break;
  }
  return order;
}

}  // namespace sparge::core
