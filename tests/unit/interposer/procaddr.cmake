# Unit tests of the generated driver entry points and cuGetProcAddress (host-only).
# procaddr.c, unimplemented.c and the sources gen_entries.py writes are compiled straight into
# the test, so it needs neither the rest of the interposer nor a GPU. Also checks that the
# generator refuses headers it cannot map, and pulls in the GPU-host cross-check tools
# (tests/gpu/procaddr_tools.cmake). Include this file from the unit tests' CMakeLists.txt; it
# expects rgpu_util, PkgConfig::CMOCKA, Threads, Python3_EXECUTABLE and CUDA_INCLUDE_DIR from
# the top level.
set(RGPU_PROCADDR_SRC ${CMAKE_CURRENT_LIST_DIR}/../../../interposer)
include(${RGPU_PROCADDR_SRC}/gen/entries.cmake)

# The same folder interposer/CMakeLists.txt is expected to generate into; if it does, this
# reuses its rule instead of adding a second one.
rgpu_generate_entries(${CMAKE_BINARY_DIR}/interposer/gen
  RGPU_PROCADDR_GEN_SOURCES RGPU_PROCADDR_GEN_MAP RGPU_PROCADDR_GEN_TARGET)

rgpu_add_unit_test(test_procaddr
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_procaddr.c
          ${RGPU_PROCADDR_SRC}/procaddr.c
          ${RGPU_PROCADDR_SRC}/unimplemented.c
          ${RGPU_PROCADDR_GEN_SOURCES}
  LIBS rgpu_util Threads::Threads)
target_include_directories(test_procaddr PRIVATE ${RGPU_PROCADDR_SRC} ${CUDA_INCLUDE_DIR})
target_compile_definitions(test_procaddr PRIVATE IP_TESTING)
add_dependencies(test_procaddr ${RGPU_PROCADDR_GEN_TARGET})

add_test(NAME unit.gen_entries_refuses
  COMMAND ${Python3_EXECUTABLE} ${RGPU_PROCADDR_SRC}/gen/test_gen_entries.py
          --cc ${CMAKE_C_COMPILER} --include ${CUDA_INCLUDE_DIR})
set_tests_properties(unit.gen_entries_refuses PROPERTIES LABELS unit TIMEOUT 120)

include(${CMAKE_CURRENT_LIST_DIR}/../../gpu/procaddr_tools.cmake)
