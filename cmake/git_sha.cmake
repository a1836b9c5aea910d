# Writes OUTPUT (a header defining RANKSCOPE_GIT_SHA) from the checkout in SOURCE_DIR, at every build, but touches it
# only when the text changes, so a commit recompiles one small file instead of waiting for the next configure.
# "-dirty" marks a build from a tree with uncommitted changes to tracked files.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR NOT sha)
  set(sha "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND sha "-dirty")
  endif()
endif()
set(text "#pragma once\n// Generated at build time by cmake/git_sha.cmake; do not edit.\n#define RANKSCOPE_GIT_SHA \"${sha}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
