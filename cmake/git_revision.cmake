# Run at build time (not configure time) by the paratrain_git_revision target, so the revision
# in `paratrain --version` and every record follows rebuilds. Writes OUT only when it changes,
# so an unchanged revision recompiles nothing.
#   cmake -DSOURCE_DIR=... -DOUT=.../git_revision.h -P git_revision.cmake
set(rev "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                  WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE head
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND head)
    set(rev "${head}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE dirty
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(dirty)
      string(APPEND rev "-dirty")
    endif()
  endif()
endif()
set(text "#pragma once\n// Generated at build time by cmake/git_revision.cmake.\n#define PARATRAIN_GIT_REV \"${rev}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
