/* A stand-in libnvidia-ml for CPU tests: one device at PCI bus 0000:01:00.0, SM clock 1755 of max 1980 MHz. */
#include <string.h>

static int initCount = 0;

int nvmlInit_v2(void) { ++initCount; return 0; }
int nvmlShutdown(void) { return initCount > 0 ? (--initCount, 0) : 1; /* NVML_ERROR_UNINITIALIZED */ }
int fakeNvmlInitCount(void) { return initCount; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index != 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = (void*)&initCount;
  return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char* busId, void** device) {
  if (strcmp(busId, "0000:01:00.0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
  *device = (void*)&initCount;
  return 0;
}
int nvmlDeviceGetClockInfo(void* device, int type, unsigned* mhz) {
  if (device != &initCount || initCount == 0) return 1;
  if (type != 1) return 3; /* NVML_ERROR_NOT_SUPPORTED for anything but NVML_CLOCK_SM */
  *mhz = 1755;
  return 0;
}
int nvmlDeviceGetMaxClockInfo(void* device, int type, unsigned* mhz) {
  if (device != &initCount || type != 1) return 3;
  *mhz = 1980;
  return 0;
}
const char* nvmlErrorString(int code) { return code == 6 ? "Not Found" : "Unknown Error"; }
