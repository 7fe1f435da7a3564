# Imported targets for the CPU half of LibTorch, taken from the PyPI `torch` wheel in the
# project venv.  Why not find_package(Torch): TorchConfig always pulls Caffe2's cuda.cmake,
# which needs the CUDA toolkit at configure time and links libtorch_cuda + cudart into every
# executable.  The CPU build needs only libc10 + libtorch_cpu (docs/build.md "Build facts").
#
# Input : STAGESCOPE_TORCH_ROOT = <site-packages>/torch (set by the top-level CMakeLists).
# Output: target stagescope::torch_cpu (INTERFACE), with c10d Gloo enabled.
if(NOT EXISTS "${STAGESCOPE_TORCH_ROOT}/lib/libtorch_cpu.so")
  message(FATAL_ERROR "LibTorch not found at STAGESCOPE_TORCH_ROOT='${STAGESCOPE_TORCH_ROOT}': "
                      "expected lib/libtorch_cpu.so (run scripts/bootstrap.sh)")
endif()
find_path(GLOO_INCLUDE_DIR gloo/config.h PATHS "${STAGESCOPE_TORCH_ROOT}/include" /usr/include
          REQUIRED)
# libtorch_cpu.so of the cu130 wheel NEEDs libcudart.so.13 and libcupti.so.13 (even on CPU);
# its RPATH points at pip's nvidia/ packages, which we do not install (--no-deps), so the CUDA
# toolkit's copies are put on our executables' RUNPATH instead.
find_path(STAGESCOPE_CUDART_DIR libcudart.so.13
          PATHS /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
                "${STAGESCOPE_TORCH_ROOT}/../nvidia/cu13/lib" NO_DEFAULT_PATH)
find_path(STAGESCOPE_CUPTI_DIR libcupti.so.13
          PATHS /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64
                "${STAGESCOPE_TORCH_ROOT}/../nvidia/cu13/lib" NO_DEFAULT_PATH)
if(NOT STAGESCOPE_CUDART_DIR OR NOT STAGESCOPE_CUPTI_DIR)
  message(FATAL_ERROR "libtorch_cpu.so needs libcudart.so.13 and libcupti.so.13 at run time; "
                      "not found under /usr/local/cuda (install the CUDA 13.0 toolkit)")
endif()

add_library(stagescope_torch_cpu INTERFACE)
add_library(stagescope::torch_cpu ALIAS stagescope_torch_cpu)
target_include_directories(stagescope_torch_cpu SYSTEM INTERFACE
  "${STAGESCOPE_TORCH_ROOT}/include"
  "${STAGESCOPE_TORCH_ROOT}/include/torch/csrc/api/include"
  "${GLOO_INCLUDE_DIR}")
target_compile_definitions(stagescope_torch_cpu INTERFACE USE_DISTRIBUTED USE_C10D_GLOO)
target_link_libraries(stagescope_torch_cpu INTERFACE
  "${STAGESCOPE_TORCH_ROOT}/lib/libtorch_cpu.so" "${STAGESCOPE_TORCH_ROOT}/lib/libc10.so"
  "-Wl,-rpath-link,${STAGESCOPE_CUDART_DIR}:${STAGESCOPE_CUPTI_DIR}")
set(STAGESCOPE_TORCH_RPATH "${STAGESCOPE_TORCH_ROOT}/lib;${STAGESCOPE_CUDART_DIR};${STAGESCOPE_CUPTI_DIR}")
