# Unit tests of the dark-API emulation (docs/dark-api.md §9, host-only). dark.c, integrity.c
# and cls.c are compiled in directly on top of a mock of the interposer's core, so the test
# needs neither the rest of the interposer nor a GPU. Include this file from the unit tests'
# CMakeLists.txt; it expects rgpu_util, PkgConfig::NETTLE, PkgConfig::CMOCKA, Threads and
# CUDA_INCLUDE_DIR from the top level.
set(RGPU_DARK_SRC ${CMAKE_CURRENT_LIST_DIR}/../../../interposer)

rgpu_add_unit_test(test_dark
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dark.c
          ${CMAKE_CURRENT_LIST_DIR}/mock_core.c
          ${RGPU_DARK_SRC}/dark.c
          ${RGPU_DARK_SRC}/integrity.c
          ${RGPU_DARK_SRC}/cls.c
  LIBS rgpu_util PkgConfig::NETTLE Threads::Threads)
target_include_directories(test_dark PRIVATE ${RGPU_DARK_SRC} ${CUDA_INCLUDE_DIR})
