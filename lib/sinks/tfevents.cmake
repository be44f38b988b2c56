# SPDX-License-Identifier: MIT
# TensorBoard event files in libgpumon: generates the protobuf-c code of tfevents.proto with
# protoc-c (Debian protobuf-c-compiler) and links libprotobuf-c (Debian libprotobuf-c-dev).
find_program(PROTOC_C_EXECUTABLE protoc-c)
find_path(PROTOBUF_C_INCLUDE_DIR protobuf-c/protobuf-c.h)
find_library(PROTOBUF_C_LIBRARY protobuf-c)
if(NOT PROTOC_C_EXECUTABLE OR NOT PROTOBUF_C_INCLUDE_DIR OR NOT PROTOBUF_C_LIBRARY)
  message(FATAL_ERROR "protobuf-c not found: install the Debian packages libprotobuf-c-dev and "
                      "protobuf-c-compiler (make deps does)")
endif()
set(TFEVENTS_GEN_DIR ${CMAKE_BINARY_DIR}/generated)
add_custom_command(
  OUTPUT ${TFEVENTS_GEN_DIR}/tfevents.pb-c.c ${TFEVENTS_GEN_DIR}/tfevents.pb-c.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${TFEVENTS_GEN_DIR}
  COMMAND ${PROTOC_C_EXECUTABLE} --c_out=${TFEVENTS_GEN_DIR}
          -I${CMAKE_CURRENT_SOURCE_DIR}/lib/sinks ${CMAKE_CURRENT_SOURCE_DIR}/lib/sinks/tfevents.proto
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/lib/sinks/tfevents.proto
  COMMENT "protoc-c tfevents.proto")
target_sources(libgpumon PRIVATE lib/sinks/tfevents.c ${TFEVENTS_GEN_DIR}/tfevents.pb-c.c)
# generated code: not ours to keep free of every warning we ask of our own files
set_source_files_properties(${TFEVENTS_GEN_DIR}/tfevents.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")
target_include_directories(libgpumon PRIVATE ${TFEVENTS_GEN_DIR})
target_include_directories(libgpumon SYSTEM PRIVATE ${PROTOBUF_C_INCLUDE_DIR})
target_link_libraries(libgpumon PRIVATE ${PROTOBUF_C_LIBRARY})
