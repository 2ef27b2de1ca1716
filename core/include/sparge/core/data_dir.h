// Where the product's bundled data (the sample capture, fonts, icon) is found at run time: next to the
// executable, never at a path fixed when the program was built, so an installed tree can be moved.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sparge::core {

// Environment variable that names the data folder explicitly (it then is the only candidate).
inline constexpr const char* kDataDirVariable = "SPARGE_DATA_DIR";
// The bundled sample capture's name inside the data folder.
inline constexpr const char* kSampleCaptureFile = "sample.h5";

// The running executable (from /proc/self/exe); empty when it cannot be read.
std::filesystem::path executablePath();

// Folders that may hold the data, in search order: $SPARGE_DATA_DIR when set; otherwise
// share/sparge-studio beside the executable's folder (bin/../share/sparge-studio, the installed layout)
// and one level higher (the build tree mirrors the layout in <build>/share/sparge-studio for programs in
// <build>/cli, <build>/gui and <build>/tests/<module>).
std::vector<std::filesystem::path> dataDirCandidates();

// The first candidate that holds `relative` (e.g. "fonts/DejaVuSans.ttf"), or nullopt.
std::optional<std::filesystem::path> findDataFile(const std::string& relative);

// The same, but throws sparge::Error naming the file and the folders tried, and how to fix it.
std::filesystem::path dataFile(const std::string& relative);

// The bundled sample capture (opened when a command gets no file). Throws like dataFile().
std::filesystem::path sampleCapturePath();

}  // namespace sparge::core
