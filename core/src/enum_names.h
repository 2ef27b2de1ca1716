// Private: parsing an enum from the name its toString() gives, with an error naming every accepted name.
#pragma once

#include <initializer_list>
#include <string>

#include "sparge/core/error.h"

namespace sparge::core {

// The value whose toString() is `text`; otherwise an error naming `what` and every accepted name.
template <class Enum>
Enum parseByName(const std::string& text, std::initializer_list<Enum> values, const char* what) {
  std::string names;
  for (Enum v : values) {
    if (text == toString(v)) return v;
    names += (names.empty() ? "" : ", ") + std::string(toString(v));
  }
  throw Error(what, "'" + text + "' is not known — use one of " + names);
}

}  // namespace sparge::core
