# Small helpers shared by every component's CMakeLists.txt.

include(CheckCCompilerFlag)

set(RGPU_WARNINGS -Wall -Wextra -Wformat=2 -Wshadow -Wstrict-prototypes
    -Wmissing-prototypes -Wno-unused-parameter)

# rgpu_add_library(NAME SOURCES... [LIBS libs...])
# A static, position-independent library (it may end up inside the interposer).
function(rgpu_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES} ${A_UNPARSED_ARGUMENTS})
  target_compile_options(${name} PRIVATE ${RGPU_WARNINGS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(A_LIBS)
    target_link_libraries(${name} PUBLIC ${A_LIBS})
  endif()
  if(A_INCLUDES)
    target_include_directories(${name} PUBLIC ${A_INCLUDES})
  endif()
endfunction()

# rgpu_add_executable(NAME SOURCES... [LIBS libs...]) -> build/bin/NAME
# In the build tree the run path finds the libraries build/lib ships (the GPU host lacks some);
# an installed copy has none: it uses the system's, which its package depends on.
function(rgpu_add_executable name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${A_SOURCES} ${A_UNPARSED_ARGUMENTS})
  target_compile_options(${name} PRIVATE ${RGPU_WARNINGS})
  target_link_libraries(${name} PRIVATE ${A_LIBS})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin
    BUILD_RPATH "\$ORIGIN/../lib" INSTALL_RPATH "")
endfunction()

# rgpu_add_unit_test(NAME SOURCES... [LIBS libs...]) -> a cmocka test run by ctest
function(rgpu_add_unit_test name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${A_SOURCES} ${A_UNPARSED_ARGUMENTS})
  target_compile_options(${name} PRIVATE ${RGPU_WARNINGS} -Wno-missing-prototypes)
  target_link_libraries(${name} PRIVATE ${A_LIBS} PkgConfig::CMOCKA)
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/unit
    BUILD_RPATH "\$ORIGIN/../../lib")
  add_test(NAME unit.${name} COMMAND ${name})
  set_tests_properties(unit.${name} PROPERTIES LABELS unit TIMEOUT 120)
endfunction()

# rgpu_add_cut_test(NAME [ENVIRONMENT vars...] COMMAND cmd args...) -> cut.NAME, when
# RGPU_CUT_TESTS is on: the program run through tests/e2e/with_cuts.sh until cutproxy has cut
# its connection RGPU_CUT_COUNT times; every run must still pass (testing.md, reliability
# targets). They need the interposer's resume after a broken connection.
function(rgpu_add_cut_test name)
  cmake_parse_arguments(A "" "" "ENVIRONMENT;COMMAND" ${ARGN})
  if(NOT RGPU_CUT_TESTS)
    return()
  endif()
  add_test(NAME cut.${name} COMMAND ${CMAKE_SOURCE_DIR}/tests/e2e/with_cuts.sh ${CMAKE_BINARY_DIR}
    ${RGPU_CUT_COUNT} ${A_COMMAND})
  set_tests_properties(cut.${name} PROPERTIES LABELS cut TIMEOUT 900)
  if(A_ENVIRONMENT)
    set_tests_properties(cut.${name} PROPERTIES ENVIRONMENT "${A_ENVIRONMENT}")
  endif()
endfunction()
