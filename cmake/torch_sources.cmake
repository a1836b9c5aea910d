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
#   rankscope_plain_batches(<target> ...)              # its torch-free files too, in units of their own
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

# The torch-free <sources> of <target> compiled 8 to a unit too, in units of their own (they skip the torch header, and
# the library's take -O3): each is a generated file of #include lines, build/plain_batches/<target>_<k>.cpp, and
# the sources themselves are marked HEADER_FILE_ONLY (listed, not compiled). Most of a small torch-free file's time
# is parsing nlohmann-json, fmt and the standard headers: the 11 files of src/io/ took 68.5 s one by one and 35.2 s as
# one unit (2026-12-07). A source with its own COMPILE_DEFINITIONS keeps its own unit. With RANKSCOPE_UNITY_BUILD
# OFF, each compiles alone.
#   rankscope_plain_batches(<target> OPTIONS <compile options...> SOURCES <sources...>)
function(rankscope_plain_batches target)
  cmake_parse_arguments(PARSE_ARGV 1 batch "" "" "OPTIONS;SOURCES")
  set(plain "")
  foreach(source ${batch_SOURCES})
    get_filename_component(source ${source} ABSOLUTE)
    get_source_file_property(definitions ${source} TARGET_DIRECTORY ${target} COMPILE_DEFINITIONS)
    set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON
      SKIP_UNITY_BUILD_INCLUSION ON)
    if(batch_OPTIONS)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${batch_OPTIONS}")
    endif()
    if(RANKSCOPE_UNITY_BUILD AND NOT definitions)
      list(APPEND plain ${source})
    endif()
  endforeach()
  list(LENGTH plain count)
  set(index 0)
  set(unit 0)
  set(contents "")
  foreach(source ${plain})
    string(APPEND contents "#include \"${source}\"\n")
    math(EXPR index "${index} + 1")
    math(EXPR full "${index} % 8")
    if(full EQUAL 0 OR index EQUAL count)
      set(file ${CMAKE_BINARY_DIR}/plain_batches/${target}_${unit}.cpp)
      file(WRITE ${file}.new "${contents}")
      file(COPY_FILE ${file}.new ${file} ONLY_IF_DIFFERENT)  # an unchanged batch keeps its time stamp
      file(REMOVE ${file}.new)
      target_sources(${target} PRIVATE ${file})
      set_source_files_properties(${file} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON
        SKIP_UNITY_BUILD_INCLUSION ON)
      if(batch_OPTIONS)
        set_source_files_properties(${file} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${batch_OPTIONS}")
      endif()
      set(contents "")
      math(EXPR unit "${unit} + 1")
    endif()
  endforeach()
  if(plain)
    set_source_files_properties(${plain} TARGET_DIRECTORY ${target} PROPERTIES HEADER_FILE_ONLY ON)
  endif()
endfunction()

# <target> reuses rankscope_core's precompiled torch header in the sources that reach torch, in unity batches; the
# others skip both and compile in batches of their own (rankscope_plain_batches).
function(rankscope_use_torch_header target)
  target_precompile_headers(${target} REUSE_FROM rankscope_core)
  rankscope_unity_batches(${target})
  set(plain "")
  foreach(source ${ARGN})
    get_filename_component(source ${source} ABSOLUTE)
    if(NOT source IN_LIST RANKSCOPE_TORCH_FILES)
      list(APPEND plain ${source})
    endif()
  endforeach()
  rankscope_plain_batches(${target} SOURCES ${plain})
endfunction()
