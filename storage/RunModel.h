// The read model lives in core/model (plain structs, no SQLite); storage fills it.  This header
// keeps the storage-side names (storage::RunModel, storage::TransferPair) and defines the one
// storage-specific type: why a run file could not be read.
#pragma once

#include <stdexcept>
#include <string>

#include "core/model/RunModel.h"

namespace stagescope::storage {

using model::RunModel;
using model::sameChecksumFunction;
using model::TransferPair;

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
