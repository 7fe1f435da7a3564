// Why a run file could not be read.  The read model the reader fills is model::RunModel
// (core/model: plain structs, no SQLite); it has no second name in storage.
#pragma once

#include <stdexcept>
#include <string>

#include "core/model/RunModel.h"

namespace stagescope::storage {

// Why a file could not be read.  The message names the file and the reason.
class RunFileError : public std::runtime_error {
 public:
  enum class Kind {
    NotFound,
    NotARunFile,
    NewerVersion,
    Corrupt,
    Busy
  };  // Busy: locked by another process
  RunFileError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

}  // namespace stagescope::storage
