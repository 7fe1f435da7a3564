# The folder direction, checked on the sources (cmake -DROOT=<tree> -P FolderDirection.cmake).
#
# A file may include only from its own layer or a layer below it:
#   app (entry points: CLI, engine executable, capture, report)  >  ui  >  storage  >  core
# and inside core, the record side and the read side stay apart, both on the shared vocabulary:
#   events                      the vocabulary (records, names, checksums)
#   plan, model                 the schedule and layout; the read model
#   engine                      record side: plan + events
#   analysis                    read side: model + plan + events
# Prints every offending include as "FILE:LINE includes X (LAYER may include only ...)" and
# fails when there is one.  tests/, bench/ and third-party code are not checked.
cmake_minimum_required(VERSION 3.20)
if(NOT ROOT)
  message(FATAL_ERROR "FolderDirection: pass -DROOT=<source tree>")
endif()

# layer -> the include prefixes it may use
set(_allow_core_events "core/events/")
set(_allow_core_model "core/events/;core/model/")
set(_allow_core_plan "core/events/;core/plan/")
set(_allow_core_engine "core/events/;core/plan/;core/engine/")
set(_allow_core_analysis "core/events/;core/model/;core/plan/;core/analysis/")
set(_allow_storage "core/;storage/")
set(_allow_ui "core/;storage/;ui/")
set(_allow_app "core/;storage/;ui/;app/")
set(_layers core/events core/model core/plan core/engine core/analysis storage ui app)

set(_bad 0)
set(_checked 0)
foreach(_layer IN LISTS _layers)
  string(REPLACE "/" "_" _key "${_layer}")
  set(_allowed ${_allow_${_key}})
  file(GLOB_RECURSE _files "${ROOT}/${_layer}/*.h" "${ROOT}/${_layer}/*.cpp")
  foreach(_file IN LISTS _files)
    math(EXPR _checked "${_checked} + 1")
    file(STRINGS "${_file}" _lines)
    set(_n 0)
    foreach(_line IN LISTS _lines)
      math(EXPR _n "${_n} + 1")
      if(NOT _line MATCHES "^#include \"([a-z]+/[^\"]*)\"")
        continue()
      endif()
      set(_target "${CMAKE_MATCH_1}")
      if(NOT _target MATCHES "^(core|storage|ui|app)/")
        continue()  # a third-party header
      endif()
      set(_ok FALSE)
      foreach(_prefix IN LISTS _allowed)
        string(FIND "${_target}" "${_prefix}" _at)
        if(_at EQUAL 0)
          set(_ok TRUE)
        endif()
      endforeach()
      if(NOT _ok)
        file(RELATIVE_PATH _rel "${ROOT}" "${_file}")
        string(REPLACE ";" ", " _list "${_allowed}")
        message("${_rel}:${_n} includes ${_target} (${_layer} may include only ${_list})")
        math(EXPR _bad "${_bad} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_checked EQUAL 0)
  message(FATAL_ERROR "FolderDirection: no sources under ${ROOT} (expected core/, storage/, ...)")
endif()
if(_bad GREATER 0)
  message(FATAL_ERROR "FolderDirection: ${_bad} include(s) against the folder direction")
endif()
message("FolderDirection: ${_checked} files, every include points down or sideways")
