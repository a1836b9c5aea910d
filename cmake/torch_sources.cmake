# Which of rankscope's files reach the torch headers: directly (#include <torch/...> or <ATen/...>) or through
# rankscope's own headers (#include "..." looked up beside the file, then in include/, then in src/), to a fixpoint.
# Those are compiled with the shared precompiled torch header; every other file skips it (loading the 0.7 GB header
# costs 6–7 s per file, 2026-12-05) and, before this rule, a file that reached torch only through a rankscope header
# skipped it too and parsed torch from scratch (bert.cpp 29 s, xlnet.cpp 34 s).
#
# Computed at configure time (CONFIGURE_DEPENDS globs re-run it when files are added; an edited include list needs a
# re-configure to change a file's choice, which only costs compile time, never correctness).
#   rankscope_torch_files(RANKSCOPE_TORCH_FILES)   # absolute paths
#   rankscope_use_torch_header(<target> <sources...>)  # sources that do not reach torch skip the header
#   rankscope_unity_batches(<target>)                  # its files that reach torch compile 8 to a unit (CMakeLists)
function(rankscope_torch_files out_var)
  file(GLOB_RECURSE files
    ${CMAKE_SOURCE_DIR}/include/*.hpp ${CMAKE_SOURCE_DIR}/src/*.hpp ${CMAKE_SOURCE_DIR}/src/*.cpp
    ${CMAKE_SOURCE_DIR}/tools/*.hpp ${CMAKE_SOURCE_DIR}/tools/*.cpp ${CMAKE_SOURCE_DIR}/tests/*.hpp
    ${CMAKE_SOURCE_DIR}/tests/*.cpp ${CMAKE_SOURCE_DIR}/python/*.hpp ${CMAKE_SOURCE_DIR}/python/*.cpp
    ${CMAKE_SOURCE_DIR}/bench/*.hpp ${CMAKE_SOURCE_DIR}/bench/*.cpp ${CMAKE_SOURCE_DIR}/fuzz/*.hpp
    ${CMAKE_SOURCE_DIR}/fuzz/*.cpp)
  set(reaching "")
  set(index 0)
  foreach(file ${files})
    file(READ "${file}" contents)
    if(contents MATCHES "#include <(torch|ATen)/")
      list(APPEND reaching ${file})
    endif()
    string(REGEX MATCHALL "#include \"[^\"]+\"" lines "${contents}")
    get_filename_component(directory ${file} DIRECTORY)
    set(included_${index} "")
    foreach(line ${lines})
      string(REGEX REPLACE "#include \"([^\"]+)\"" "\\1" name "${line}")
      foreach(candidate ${directory}/${name} ${CMAKE_SOURCE_DIR}/include/${name} ${CMAKE_SOURCE_DIR}/src/${name})
        if(EXISTS "${candidate}")
          get_filename_component(candidate ${candidate} ABSOLUTE)
          list(APPEND included_${index} ${candidate})
          break()
        endif()
      endforeach()
    endforeach()
    math(EXPR index "${index} + 1")
  endforeach()
  set(changed TRUE)
  while(changed)
    set(changed FALSE)
    set(index 0)
    foreach(file ${files})
      if(NOT file IN_LIST reaching)
        foreach(included ${included_${index}})
          if(included IN_LIST reaching)
            list(APPEND reaching ${file})
            set(changed TRUE)
            break()
          endif()
        endforeach()
      endif()
      math(EXPR index "${index} + 1")
    endforeach()
  endwhile()
  set(${out_var} ${reaching} PARENT_SCOPE)
endfunction()

# Unity batches for <target> when RANKSCOPE_UNITY_BUILD is on (CMakeLists.txt says why); the files that skip the
# precompiled header are marked SKIP_UNITY_BUILD_INCLUSION where that is decided.
function(rankscope_unity_batches target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${RANKSCOPE_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 8)
endfunction()

# <target> reuses rankscope_core's precompiled torch header in the sources that reach torch, in unity batches; the
# others skip both.
function(rankscope_use_torch_header target)
  target_precompile_headers(${target} REUSE_FROM rankscope_core)
  rankscope_unity_batches(${target})
  foreach(source ${ARGN})
    get_filename_component(source ${source} ABSOLUTE)
    if(NOT source IN_LIST RANKSCOPE_TORCH_FILES)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON
        SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
endfunction()
