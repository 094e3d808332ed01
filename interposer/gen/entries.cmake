# Build rule for everything generated from the driver's headers (cuda.h, cudaProfiler.h and
# their typedefs headers; gen_entries.py says which, what and how).
#
# rgpu_generate_entries(OUTDIR OUT_SOURCES OUT_MAP [OUT_TARGET])
#   Adds the command that runs gen_entries.py into OUTDIR (re-run when the generator or any
#   header it reads changes: gen_entries.py --list-inputs names them) and returns:
#     OUT_SOURCES  entries_gen.c procaddr_gen.c errors_gen.c (compile them with interposer/ on
#                  the include path, next to procaddr.c and unimplemented.c)
#     OUT_MAP      exports.map, the linker version script (-Wl,--version-script=...; add it
#                  to LINK_DEPENDS so a changed list relinks)
#     OUT_TARGET   (optional) a custom target that produces all of them; also OUTDIR holds
#                  procaddr_queries.txt for tests/gpu/procaddr_dump.c.
#   Every target that compiles OUT_SOURCES or links with OUT_MAP should
#   add_dependencies(<target> ${OUT_TARGET}): the rule then runs once, before them (without
#   it, make attaches the rule to each such target of the directory and may run it twice).
#   Calling the function again with the same OUTDIR (from another directory) adds no second
#   rule: it returns the same paths, and there the dependency is what makes the files exist
#   before the target compiles.
# Needs Python3_EXECUTABLE and CUDA_INCLUDE_DIR from the top level.
include_guard(GLOBAL)

set(RGPU_ENTRIES_GEN_DIR ${CMAKE_CURRENT_LIST_DIR})

# The headers gen_entries.py reads, asked of the generator itself so the list lives in one
# place; a change to the generator re-runs this at the next build.
execute_process(
  COMMAND ${Python3_EXECUTABLE} ${RGPU_ENTRIES_GEN_DIR}/gen_entries.py --list-inputs
  OUTPUT_VARIABLE RGPU_ENTRIES_HEADERS RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gen_entries.py --list-inputs failed (${rc})")
endif()
string(REPLACE "\n" ";" RGPU_ENTRIES_HEADERS "${RGPU_ENTRIES_HEADERS}")
list(TRANSFORM RGPU_ENTRIES_HEADERS PREPEND ${CUDA_INCLUDE_DIR}/ OUTPUT_VARIABLE
  RGPU_ENTRIES_HEADER_PATHS)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${RGPU_ENTRIES_GEN_DIR}/gen_entries.py)

# The toolkit's stub libcuda.so: the export list must equal its exports (rgpu_check_exports).
set(RGPU_CUDA_STUB_LIB ${CUDA_INCLUDE_DIR}/../lib64/stubs/libcuda.so)

function(rgpu_generate_entries outdir out_sources out_map)
  set(gen ${RGPU_ENTRIES_GEN_DIR}/gen_entries.py)
  set(sources ${outdir}/entries_gen.c ${outdir}/procaddr_gen.c ${outdir}/errors_gen.c)
  set(map ${outdir}/exports.map)
  set(queries ${outdir}/procaddr_queries.txt)

  string(MAKE_C_IDENTIFIER "${outdir}" key)
  get_property(target GLOBAL PROPERTY RGPU_ENTRIES_TARGET_${key})
  if(NOT target)
    get_property(n GLOBAL PROPERTY RGPU_ENTRIES_TARGET_COUNT)
    if(NOT n)
      set(target rgpu_entries_gen)
      set(n 1)
    else()
      math(EXPR n "${n} + 1")
      set(target rgpu_entries_gen_${n})
    endif()
    set_property(GLOBAL PROPERTY RGPU_ENTRIES_TARGET_COUNT ${n})
    set_property(GLOBAL PROPERTY RGPU_ENTRIES_TARGET_${key} ${target})

    add_custom_command(
      OUTPUT ${sources} ${map} ${queries}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${outdir}
      COMMAND ${Python3_EXECUTABLE} ${gen} --cc ${CMAKE_C_COMPILER}
              --include ${CUDA_INCLUDE_DIR} --outdir ${outdir}
      DEPENDS ${gen} ${RGPU_ENTRIES_HEADER_PATHS}
      COMMENT "Generating driver entry points from ${RGPU_ENTRIES_HEADERS}"
      VERBATIM)
    add_custom_target(${target} DEPENDS ${sources} ${map} ${queries})
  endif()

  set(${out_sources} ${sources} PARENT_SCOPE)
  set(${out_map} ${map} PARENT_SCOPE)
  if(ARGC GREATER 3)
    set(${ARGV3} ${target} PARENT_SCOPE)
  endif()
endfunction()

# rgpu_check_exports(TARGET MAP)
#   After TARGET (the shared library) links, fail the build unless it exports exactly the
#   symbols of MAP: catches a hand-written driver function whose hidden definition replaced the
#   weak stub and so fell out of the export list. Where the toolkit has its stub libcuda.so,
#   MAP must also list exactly what the stub exports: catches a driver header the generator
#   does not read (or one it should not).
function(rgpu_check_exports target map)
  set(stub)
  if(EXISTS ${RGPU_CUDA_STUB_LIB})
    set(stub --stub ${RGPU_CUDA_STUB_LIB})
  else()
    message(STATUS "No ${RGPU_CUDA_STUB_LIB}: exports not compared with the stub library")
  endif()
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${Python3_EXECUTABLE} ${RGPU_ENTRIES_GEN_DIR}/check_exports.py
            --nm ${CMAKE_NM} --map ${map} --lib $<TARGET_FILE:${target}> ${stub}
    COMMENT "Checking the exports of ${target} against ${map}"
    VERBATIM)
endfunction()
