# The CPU kernel sets this machine can run besides its best one, for the numerics-sensitive
# tests run again under each (docs/testing.md "Figures that depend on the CPU"): ATen picks its
# kernels by ATEN_CPU_CAPABILITY (default = scalar, avx2, avx512), MKL and oneDNN theirs by
# MKL_ENABLE_INSTRUCTIONS and ONEDNN_MAX_CPU_ISA.  A figure that holds only on the machine it
# was measured on fails here first, not on the next user's CPU.
#
# Sets STAGESCOPE_CPU_KERNEL_SETS (names: "default", "avx2") and, per name N,
# STAGESCOPE_CPU_KERNEL_ENV_N: the `cmake -E env` arguments that select it.
set(STAGESCOPE_CPU_KERNEL_SETS default)
set(STAGESCOPE_CPU_KERNEL_ENV_default ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2
                                      ONEDNN_MAX_CPU_ISA=SSE41)
set(STAGESCOPE_CPU_KERNEL_ENV_avx2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2
                                   ONEDNN_MAX_CPU_ISA=AVX2)
if(EXISTS /proc/cpuinfo)
  file(READ /proc/cpuinfo _cpuinfo LIMIT 65536)
  # avx2 is a set of its own only where the best is avx512 (else it is the native run).
  if(_cpuinfo MATCHES " avx512f" AND _cpuinfo MATCHES " avx2")
    list(APPEND STAGESCOPE_CPU_KERNEL_SETS avx2)
  endif()
endif()
message(STATUS "stagescope: numerics tests also run with the CPU kernel sets: "
               "${STAGESCOPE_CPU_KERNEL_SETS}")
