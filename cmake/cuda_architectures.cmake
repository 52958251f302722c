# The CUDA architectures to build, resolved before CUDA is enabled (included from the top-level
# CMakeLists.txt ahead of project()).
#   default: 80-real;90a-real;100 — SASS for Ampere (sm_80, also run by sm_86/sm_89 GPUs), Hopper
#            with its own instructions (sm_90a: the wgmma/TMA flash kernels), datacentre Blackwell
#            (sm_100), and PTX of compute_100 that newer GPUs JIT-compile.
#   native:  the GPUs visible now (nvidia-smi), a Hopper as 90a so it keeps its wgmma kernels.
# Any other CMake list works as given (80, 86, 89, 90, 90a, 100, 120, 80-virtual, ...). The list
# as resolved reaches the code as PARATRAIN_CUDA_ARCHITECTURES (core/cuda_arch.h), which picks
# kernels at run time and names the compiled architectures in errors and `paratrain --version`.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90a-real;100" CACHE STRING "CUDA architectures (see cmake/cuda_architectures.cmake)")
endif()
if(CMAKE_CUDA_ARCHITECTURES STREQUAL "native")
  find_program(PT_NVIDIA_SMI nvidia-smi)
  set(caps "")
  if(PT_NVIDIA_SMI)
    execute_process(COMMAND "${PT_NVIDIA_SMI}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      set(caps "")
    endif()
  endif()
  if(caps STREQUAL "")
    message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES=native needs a GPU that nvidia-smi can see at configure time; "
                        "name the architectures instead, e.g. -DCMAKE_CUDA_ARCHITECTURES=\"80-real;90a-real;100\"")
  endif()
  string(REPLACE "\n" ";" caps "${caps}")
  set(resolved "")
  foreach(cap IN LISTS caps)
    string(STRIP "${cap}" cap)
    string(REPLACE "." "" arch "${cap}")
    if(arch STREQUAL "90")
      set(arch "90a")
    endif()
    list(APPEND resolved "${arch}")
  endforeach()
  list(REMOVE_DUPLICATES resolved)
  message(STATUS "CUDA architectures: native resolved to ${resolved}")
  set(CMAKE_CUDA_ARCHITECTURES "${resolved}" CACHE STRING "CUDA architectures (native, resolved)" FORCE)
endif()
