# Third-party packages.  Normally from Debian (scripts/bootstrap.sh).  On the GPU machine,
# which has no network and none of these -dev packages, scripts/gpu-prepare.sh copies their
# headers (and libsqlite3) into a folder that travels with the tree; STAGESCOPE_DEPS_DIR
# points at it and the same targets are defined from there (toml++ then header-only).
set(STAGESCOPE_DEPS_DIR "" CACHE PATH "Folder with include/ and lib/ of copied dependencies")

if(STAGESCOPE_DEPS_DIR)
  set(_inc "${STAGESCOPE_DEPS_DIR}/include")
  add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED)
  set_target_properties(tomlplusplus::tomlplusplus PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_inc}" INTERFACE_COMPILE_DEFINITIONS "TOML_HEADER_ONLY=1")
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_inc}")
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_inc}")
  add_library(SQLite::SQLite3 UNKNOWN IMPORTED)
  set_target_properties(SQLite::SQLite3 PROPERTIES
    IMPORTED_LOCATION "${STAGESCOPE_DEPS_DIR}/lib/libsqlite3.so.0" INTERFACE_INCLUDE_DIRECTORIES "${_inc}")
  set(_xxhash_inc "${_inc}")
else()
  find_package(SQLite3 REQUIRED)
  find_package(tomlplusplus REQUIRED)
  find_package(nlohmann_json REQUIRED)
  find_package(CLI11 REQUIRED)
  find_path(_xxhash_inc xxhash.h)
  if(NOT _xxhash_inc)
    message(FATAL_ERROR "xxhash.h not found: install libxxhash-dev (scripts/bootstrap.sh)")
  endif()
endif()
# xxHash, used header-only (XXH_INLINE_ALL) for XXH3-64, the checksum of recorded tensors.
add_library(xxHash::xxhash INTERFACE IMPORTED GLOBAL)
set_target_properties(xxHash::xxhash PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_xxhash_inc}")
if(STAGESCOPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
