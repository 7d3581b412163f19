# A sanitizer profile's flags, included by prefix_maps.cmake after every project() of a
# component's build (builder/core/sanitize.py plans them). Compile and link options rather than
# CMAKE_<LANG>_FLAGS: an upstream project that sets its own flags keeps ours all the same.
#
# INFINI_STACK_SANITIZE_FLAGS: -fsanitize=...;-fno-omit-frame-pointer;-g for C and C++, and for
# the link of anything C or C++ links.
# INFINI_STACK_CUDA_SANITIZE_FLAGS: the same through -Xcompiler= for nvcc's host code, and for a
# link nvcc drives.
foreach(_infini_stack_flag IN LISTS INFINI_STACK_SANITIZE_FLAGS)
  string(REPLACE "," "$<COMMA>" _infini_stack_flag "${_infini_stack_flag}")
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_infini_stack_flag}>")
  add_link_options("$<$<LINK_LANGUAGE:C,CXX>:${_infini_stack_flag}>")
endforeach()
foreach(_infini_stack_flag IN LISTS INFINI_STACK_CUDA_SANITIZE_FLAGS)
  string(REPLACE "," "$<COMMA>" _infini_stack_flag "${_infini_stack_flag}")
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:${_infini_stack_flag}>")
  add_link_options("$<$<LINK_LANGUAGE:CUDA>:${_infini_stack_flag}>")
endforeach()
