// UTF-8 validation and the escaped forms of names used by exports and terminal output.
#include "sparge/core/names.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace sparge::core {
namespace {

// Length of the valid UTF-8 sequence starting at text[i] (1..4), or 0 when the byte there starts none
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t sequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return n;
}

std::string hexByte(unsigned char c, const char* format) {
  char buf[8];
  std::snprintf(buf, sizeof buf, format, c);
  return buf;
}

}  // namespace

bool isValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequenceLength(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8Safe(std::string_view text) {
  if (isValidUtf8(text)) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequenceLength(text, i);
    if (n == 0) {
      out += hexByte(static_cast<unsigned char>(text[i]), "\\x%02x");
      ++i;
    } else {
      out += text[i] == '\\' ? std::string("\\\\") : std::string(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string printable(std::string_view text) {
  const std::string safe = utf8Safe(text);
  std::string out;
  for (size_t i = 0; i < safe.size(); ++i) {
    const auto c = static_cast<unsigned char>(safe[i]);
    const auto next = i + 1 < safe.size() ? static_cast<unsigned char>(safe[i + 1]) : 0;
    if (c < 0x20 || c == 0x7F) {
      out += hexByte(c, "\\x%02x");
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // U+0080..U+009F
      out += hexByte(next, "\\u00%02x");
      ++i;
    } else {
      out += safe[i];
    }
  }
  return out;
}

std::string shortForDisplay(std::string_view text, size_t maxBytes) {
  if (text.size() <= maxBytes) return printable(text);
  // Cut points move back to the start of a UTF-8 sequence, so no character is split.
  const auto boundary = [&](size_t i) {
    while (i > 0 && i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    return i;
  };
  const size_t tailBytes = maxBytes / 3;
  const size_t head = boundary(maxBytes - tailBytes);
  const size_t tail = boundary(text.size() - tailBytes);
  return printable(text.substr(0, head)) + "…" + printable(text.substr(tail)) + " (" +
         std::to_string(text.size()) + " bytes)";
}

}  // namespace sparge::core
