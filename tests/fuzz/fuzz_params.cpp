// libFuzzer target: the tuned-parameter JSON parser and its mapping onto an entry (`sparge run --params`).
// Every input must end in a sparge::Error or success; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sparge/core/error.h"
#include "sparge/core/params_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const sparge::core::ParamsFile file = sparge::core::parseParams(text, "fuzz.json");
    sparge::core::EntryInfo info;
    info.name = "l0";
    info.layer = 0;
    info.headsQ = 4;
    info.headsKV = 2;
    sparge::core::RunConfig config;
    std::vector<std::string> warnings;
    sparge::core::applyParams(file, "fuzz.json", info, config, &warnings);
    (void)sparge::core::paramsToJson(file);  // whatever was read can be written again
  } catch (const sparge::Error&) {
  }
  return 0;
}
