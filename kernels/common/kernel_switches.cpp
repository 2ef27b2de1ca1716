// KernelSwitches read from the environment: the one place the kernels' measuring switches are read.
#include <cstdlib>
#include <cstring>

#include "common/launch.h"

namespace sparge::cuda {

KernelSwitches KernelSwitches::fromEnvironment() {
  KernelSwitches s;
  if (const char* family = std::getenv("SPARGE_ATTN_KERNEL"); family && std::strcmp(family, "sm80") == 0)
    s.family = AttnFamily::Sm80;
  if (const char* split = std::getenv("SPARGE_SM90_SPLIT_BELOW"))
    s.sm90SplitBelow = std::strtof(split, nullptr);
  s.selectCtaPerRow = std::getenv("SPARGE_SELECT_CTA") != nullptr;
  return s;
}

}  // namespace sparge::cuda
