# The compiler's prefix maps, included by every project() of a component's build
# (CMAKE_PROJECT_INCLUDE, set by builder/plan.py). They come as CMake lists, one element a flag,
# and go in as compile options, which CMake quotes for the shell argument by argument: a path
# with a space or a shell-special character stays one argument. (In CMAKE_<LANG>_FLAGS_INIT
# they were split at every space, and CMake's compiler check failed.) The compiler check itself
# runs without them: it builds nothing that is kept.
#
# INFINI_STACK_PREFIX_MAPS: -ffile-prefix-map=PATH=/infini-stack/... for C and C++.
# INFINI_STACK_CUDA_PREFIX_MAPS: the same for nvcc's host compiler (-Xcompiler="..."; nvcc hands
# the text to a shell unquoted, so the plan quotes it once more).
foreach(_infini_stack_lang IN ITEMS C_CXX CUDA)
  if(_infini_stack_lang STREQUAL "CUDA")
    set(_infini_stack_maps "${INFINI_STACK_CUDA_PREFIX_MAPS}")
    set(_infini_stack_when "CUDA")
  else()
    set(_infini_stack_maps "${INFINI_STACK_PREFIX_MAPS}")
    set(_infini_stack_when "C,CXX")
  endif()
  foreach(_infini_stack_map IN LISTS _infini_stack_maps)
    # '>' and ',' would end the generator expression: written as $<ANGLE-R> and $<COMMA>.
    string(REPLACE ">" "$<ANGLE-R>" _infini_stack_map "${_infini_stack_map}")
    string(REPLACE "," "$<COMMA>" _infini_stack_map "${_infini_stack_map}")
    add_compile_options("$<$<COMPILE_LANGUAGE:${_infini_stack_when}>:${_infini_stack_map}>")
  endforeach()
endforeach()

# nvcc: the source's own name as the prefix maps name it (INFINI_STACK_SOURCE_MAPS, FROM=TO
# pairs), through a launcher put before any other (nvcc_source_name.sh says why), once however
# many project() calls include this file.
if(INFINI_STACK_SOURCE_MAPS AND NOT CMAKE_CUDA_COMPILER_LAUNCHER MATCHES "nvcc_source_name")
  set(CMAKE_CUDA_COMPILER_LAUNCHER
    sh "${CMAKE_CURRENT_LIST_DIR}/nvcc_source_name.sh" ${INFINI_STACK_SOURCE_MAPS} --
    ${CMAKE_CUDA_COMPILER_LAUNCHER})
endif()

# A sanitizer profile (--sanitize): its compile and link flags (builder/cmake/sanitize.cmake).
if(INFINI_STACK_SANITIZE_FLAGS)
  include("${CMAKE_CURRENT_LIST_DIR}/sanitize.cmake")
endif()
