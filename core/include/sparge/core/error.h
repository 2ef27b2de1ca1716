// sparge::Error: the one exception type of the project, carrying where (file, HDF5 path) and what.
#pragma once

#include <stdexcept>
#include <string>

namespace sparge {

// Thrown by core (and the layers above) for every bad input or runtime failure.
// `where` names the file and, for captures, the HDF5 path ("capture.h5:/entries/l0/q");
// `what()` is the full message a user sees: "<where>: <problem>".
class Error : public std::runtime_error {
 public:
  Error(std::string where, std::string problem)
      : std::runtime_error(where.empty() ? problem : where + ": " + problem),
        where_(std::move(where)),
        problem_(std::move(problem)) {}

  const std::string& where() const { return where_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string where_;
  std::string problem_;
};

}  // namespace sparge
