# Writes OUTPUT (build_info.cc): the commit this build is made from and its
# target, for `gputriage --version`. Run at every build (cmake -P); the file is
# rewritten only when its text changes, so an unchanged tree recompiles nothing.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -DTARGET_TEXT=... [-DCOMMIT=...] -P build_info.cmake
if(NOT COMMIT)
  set(COMMIT unknown)
  find_program(GIT git)
  if(GIT AND EXISTS ${SOURCE_DIR}/.git)
    execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse --short=12 HEAD OUTPUT_VARIABLE head
                    OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND head)
      # Tracked files changed since that commit: the build is not that commit.
      execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} status --porcelain --untracked-files=no
                      OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      set(COMMIT ${head})
      if(changes)
        set(COMMIT "${head}-modified")
      endif()
    endif()
  endif()
endif()
set(text "// Written by cmake/build_info.cmake at build time.
#include \"src/util/build_info.h\"

namespace gputriage {
const char* const kBuildCommit = \"${COMMIT}\";
const char* const kBuildTarget = \"${TARGET_TEXT}\";
}  // namespace gputriage
")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
