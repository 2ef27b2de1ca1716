# The cuDNN dense baseline (kernels/engine/cudnn_sdpa.cpp), included by cuda.cmake. Its headers: cudnn.h from
# the CUDA install and the cudnn-frontend headers, fetched into the build tree by
# scripts/fetch-cudnn-frontend.sh (pinned, checksum-verified, never committed). libcudnn.so.9 itself is
# loaded at run time, so a build with the headers still runs where cuDNN is missing (and says why).
set(SPARGE_WITH_CUDNN AUTO CACHE STRING "cuDNN dense baseline: AUTO (when its headers can be had), ON, OFF")
set(SPARGE_CUDNN_FRONTEND_DIR "" CACHE PATH "Folder holding include/cudnn_frontend.h; empty: fetch it")
set(_sparge_cudnn_missing "")
if(SPARGE_WITH_CUDNN STREQUAL "OFF")
  set(_sparge_cudnn_missing "this build was configured with SPARGE_WITH_CUDNN=OFF")
else()
  find_path(SPARGE_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include/x86_64-linux-gnu)
  if(NOT SPARGE_CUDNN_INCLUDE_DIR)
    set(_sparge_cudnn_missing "cudnn.h was not found when this build was configured")
  else()
    set(_sparge_cudnn_fe "${SPARGE_CUDNN_FRONTEND_DIR}")
    if(NOT _sparge_cudnn_fe)
      set(_sparge_cudnn_fe "${CMAKE_BINARY_DIR}/_deps/cudnn-frontend")
      execute_process(COMMAND bash "${PROJECT_SOURCE_DIR}/scripts/fetch-cudnn-frontend.sh" "${_sparge_cudnn_fe}"
                      RESULT_VARIABLE _sparge_rc ERROR_VARIABLE _sparge_err OUTPUT_QUIET)
      if(NOT _sparge_rc EQUAL 0)
        message(STATUS "sparge_kernels: cudnn-frontend headers not fetched: ${_sparge_err}")
      endif()
    endif()
    if(NOT EXISTS "${_sparge_cudnn_fe}/include/cudnn_frontend.h")
      set(_sparge_cudnn_missing "the cudnn-frontend headers were not available when this build was configured")
    endif()
  endif()
endif()
if(_sparge_cudnn_missing AND SPARGE_WITH_CUDNN STREQUAL "ON")
  message(FATAL_ERROR "SPARGE_WITH_CUDNN=ON but ${_sparge_cudnn_missing}")
endif()

target_sources(sparge_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/engine/cudnn_sdpa.cpp)
if(_sparge_cudnn_missing)
  target_compile_definitions(sparge_kernels PRIVATE SPARGE_CUDNN_MISSING="${_sparge_cudnn_missing}")
  message(STATUS "sparge_kernels: no cuDNN baseline (${_sparge_cudnn_missing})")
else()
  # The frontend's headers are third-party: no warnings from them.
  target_include_directories(sparge_kernels SYSTEM PRIVATE "${_sparge_cudnn_fe}/include" "${SPARGE_CUDNN_INCLUDE_DIR}")
  find_library(SPARGE_CUDNN_LIBRARY_PATH NAMES libcudnn.so.9 HINTS ${CUDAToolkit_LIBRARY_DIR}
               ${CUDAToolkit_LIBRARY_ROOT}/lib)
  set(_sparge_cudnn_build_path "")
  if(SPARGE_CUDNN_LIBRARY_PATH)
    set(_sparge_cudnn_build_path "${SPARGE_CUDNN_LIBRARY_PATH}")
  endif()
  target_compile_definitions(sparge_kernels PRIVATE SPARGE_HAVE_CUDNN_FRONTEND=1
                             SPARGE_CUDNN_BUILD_PATH="${_sparge_cudnn_build_path}")
  target_link_libraries(sparge_kernels PRIVATE ${CMAKE_DL_LIBS})
  message(STATUS "sparge_kernels: cuDNN baseline with cudnn-frontend headers from ${_sparge_cudnn_fe}; "
                 "libcudnn.so.9 loaded at run time (build-time copy: ${_sparge_cudnn_build_path})")
endif()
