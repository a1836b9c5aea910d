# Writes OUTPUT (a header defining RANKSCOPE_GIT_SHA) from the checkout in SOURCE_DIR, at every build, but touches it
# only when the text changes, so a commit recompiles one small file instead of waiting for the next configure.
# "-dirty.<8 hex>" marks a build from a tree with uncommitted changes to tracked files; the hex digits begin the SHA-256
# of `git diff HEAD --binary`, so two builds of one commit with different uncommitted changes have different versions
# (a sweep or reproduce folder then re-runs the other build's cells). Untracked files are not hashed.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR NOT sha)
  set(sha "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    execute_process(COMMAND git diff HEAD --binary WORKING_DIRECTORY ${SOURCE_DIR}
      OUTPUT_VARIABLE diff ERROR_QUIET)
    string(SHA256 diff_hash "${diff}")
    string(SUBSTRING "${diff_hash}" 0 8 diff_hash)
    string(APPEND sha "-dirty.${diff_hash}")
  endif()
endif()
set(text "#pragma once\n// Generated at build time by cmake/git_sha.cmake; do not edit.\n#define RANKSCOPE_GIT_SHA \"${sha}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
