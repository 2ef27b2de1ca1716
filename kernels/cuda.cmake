# sparge_kernels: the CUDA engine (GPU Stage 1, block-sparse attention with PV skip, dense path,
# fp32 reference, error reduction) and the benchmark driver. Included by kernels/CMakeLists.txt only
# when a CUDA compiler was found; architectures and the CUDA C++20 flag come from the top level.
# ptxas's notes on registers spilled to local memory are informational (the kernels' known spills and why
# they stay are in kernels/NOTES.md) and would make every build print them; SPARGE_REPORT_SPILLS=ON prints
# them again while working on a kernel.
option(SPARGE_REPORT_SPILLS "Let ptxas report register spills of every kernel (informational)" OFF)
set(SPARGE_SPILL_REPORT "")
if(SPARGE_REPORT_SPILLS)
  set(SPARGE_SPILL_REPORT $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills>)
endif()

# sparge_attention: the Stage-2 attention families and the operand quantization, with no dependency beyond
# cudart and the core headers (kernel tests and benchmarks link it alone).
add_library(sparge_attention STATIC
  ${CMAKE_CURRENT_LIST_DIR}/attention/sm80/attention_sm80.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention/sm90/attention_sm90.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention/sm90/instantiations/attention_sm90_d64_exact.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention/sm90/instantiations/attention_sm90_d64_int8fp8.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention/sm90/instantiations/attention_sm90_d128_exact.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention/sm90/instantiations/attention_sm90_d128_int8fp8.cu
  ${CMAKE_CURRENT_LIST_DIR}/stages/quantize.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention/sm90/tma_map.cpp
  ${CMAKE_CURRENT_LIST_DIR}/common/cuda_util.cpp
  ${CMAKE_CURRENT_LIST_DIR}/common/kernel_switches.cpp)
target_include_directories(sparge_attention PUBLIC ${PROJECT_SOURCE_DIR}/core/include
                                            PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(sparge_attention PUBLIC CUDA::cudart)
set_target_properties(sparge_attention PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_SEPARABLE_COMPILATION OFF)
target_compile_options(sparge_attention PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr>
  ${SPARGE_SPILL_REPORT})

add_library(sparge_kernels STATIC
  ${CMAKE_CURRENT_LIST_DIR}/stages/predict.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/finish.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/xattention.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/moba.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/predictors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/predictors/line_common.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/cover_select.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/line_scores.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/minference.cu
  ${CMAKE_CURRENT_LIST_DIR}/predictors/flexprefill.cu
  ${CMAKE_CURRENT_LIST_DIR}/stages/reference.cu
  ${CMAKE_CURRENT_LIST_DIR}/stages/error.cu
  ${CMAKE_CURRENT_LIST_DIR}/engine/device_stages.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine/cuda_engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine/entry_upload.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine/half_bits.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine/engine_errors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine/engine_results.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine/head_results.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine/bench.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stages/stats_quant.cu
  ${CMAKE_CURRENT_LIST_DIR}/call/call_kernels.cu
  ${CMAKE_CURRENT_LIST_DIR}/common/upload.cu
  ${CMAKE_CURRENT_LIST_DIR}/call/whole_call.cpp)
target_include_directories(sparge_kernels PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include
                                          PRIVATE ${CMAKE_CURRENT_LIST_DIR})
# The engine's stage clock is the one CUDA-event timer (profiler/, a leaf target of core + cudart).
target_link_libraries(sparge_kernels PUBLIC sparge_core sparge_attention CUDA::cudart PRIVATE sparge_event_timer)
# Lets code above the kernels layer (cli/cmd_bench.cpp) know that the CUDA API is linked in.
target_compile_definitions(sparge_kernels PUBLIC SPARGE_HAVE_CUDA_KERNELS=1)
set_target_properties(sparge_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON
                                                CUDA_SEPARABLE_COMPILATION OFF)
# -lineinfo lets compute-sanitizer and ncu name source lines; no fast-math: Stage 1 mirrors IEEE
# rounding of sqrt and division (the attention kernels use ex2.approx explicitly).
target_compile_options(sparge_kernels PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr>
  ${SPARGE_SPILL_REPORT})

# Kernel-level benchmark of the attention families and the quantization (bench/attention_bench.cu).
add_executable(sparge_attention_bench ${PROJECT_SOURCE_DIR}/bench/attention_bench.cu)
target_link_libraries(sparge_attention_bench PRIVATE sparge_attention)
target_include_directories(sparge_attention_bench PRIVATE ${CMAKE_CURRENT_LIST_DIR})

# How fast an SM takes K/V in through TMA with nothing else running (bench/tma_stream_bench.cu): the yardstick
# for the Hopper sparse walks.
add_executable(sparge_tma_stream_bench ${PROJECT_SOURCE_DIR}/bench/tma_stream_bench.cu)
target_link_libraries(sparge_tma_stream_bench PRIVATE sparge_attention)
target_include_directories(sparge_tma_stream_bench PRIVATE ${CMAKE_CURRENT_LIST_DIR})

# Stage 1 of MInference and FlexPrefill alone at a given shape (bench/line_methods_bench.cpp).
add_executable(sparge_line_methods_bench ${PROJECT_SOURCE_DIR}/bench/line_methods_bench.cpp)
target_link_libraries(sparge_line_methods_bench PRIVATE sparge_kernels)
target_include_directories(sparge_line_methods_bench PRIVATE ${CMAKE_CURRENT_LIST_DIR})

# CUDA's start-up in one process (bench/cuda_start.cpp): a fixed part of every rank's time in a multi-GPU job.
add_executable(sparge_cuda_start_bench ${PROJECT_SOURCE_DIR}/bench/cuda_start.cpp)
target_link_libraries(sparge_cuda_start_bench PRIVATE CUDA::cudart_static CUDA::cuda_driver)

include(${CMAKE_CURRENT_LIST_DIR}/cudnn.cmake)  # the cuDNN dense baseline
