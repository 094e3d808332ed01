# The cuGetProcAddress cross-check against the real driver (run on the GPU host):
#   build/bin/procaddr_dump           dlopens libcuda.so.1 and prints its answers (libdl only)
#   build/bin/procaddr_selfdump       the same program answering with rgpu's resolver
#   build/tests/procaddr_queries.txt  the queries, generated from cudaTypedefs.h
#   build/tests/procaddr_expected.txt rgpu's answers, written at build time
# On the GPU host:
#   build/bin/procaddr_dump -o real.txt build/tests/procaddr_queries.txt
#   tests/gpu/procaddr_compare.py real.txt build/tests/procaddr_expected.txt
# Included by tests/unit/interposer/procaddr.cmake after rgpu_generate_entries(), whose
# RGPU_PROCADDR_GEN_* results it uses.
get_filename_component(RGPU_PROCADDR_GEN_DIR ${RGPU_PROCADDR_GEN_MAP} DIRECTORY)
set(RGPU_PROCADDR_QUERIES_GEN ${RGPU_PROCADDR_GEN_DIR}/procaddr_queries.txt)
set(RGPU_PROCADDR_QUERIES ${CMAKE_BINARY_DIR}/tests/procaddr_queries.txt)
set(RGPU_PROCADDR_EXPECTED ${CMAKE_BINARY_DIR}/tests/procaddr_expected.txt)

rgpu_add_executable(procaddr_dump
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/procaddr_dump.c
  LIBS ${CMAKE_DL_LIBS})

rgpu_add_executable(procaddr_selfdump
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/procaddr_dump.c
          ${RGPU_PROCADDR_SRC}/procaddr.c
          ${RGPU_PROCADDR_SRC}/unimplemented.c
          ${RGPU_PROCADDR_GEN_SOURCES}
  LIBS rgpu_util Threads::Threads)
target_include_directories(procaddr_selfdump PRIVATE ${RGPU_PROCADDR_SRC} ${CUDA_INCLUDE_DIR})
target_compile_definitions(procaddr_selfdump PRIVATE PROCADDR_SELFDUMP)
add_dependencies(procaddr_selfdump ${RGPU_PROCADDR_GEN_TARGET})

add_custom_command(
  OUTPUT ${RGPU_PROCADDR_QUERIES} ${RGPU_PROCADDR_EXPECTED}
  COMMAND ${CMAKE_COMMAND} -E copy ${RGPU_PROCADDR_QUERIES_GEN} ${RGPU_PROCADDR_QUERIES}
  COMMAND procaddr_selfdump -o ${RGPU_PROCADDR_EXPECTED} ${RGPU_PROCADDR_QUERIES}
  DEPENDS procaddr_selfdump ${RGPU_PROCADDR_GEN_TARGET} ${RGPU_PROCADDR_QUERIES_GEN}
  COMMENT "Answering procaddr_queries.txt with rgpu's cuGetProcAddress"
  VERBATIM)
add_custom_target(procaddr_expected ALL
  DEPENDS ${RGPU_PROCADDR_QUERIES} ${RGPU_PROCADDR_EXPECTED})
