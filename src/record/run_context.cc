// What a stored run keeps of where it ran: the repository's commit, the working
// directory, the user, the GPUs the job could see.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "src/record/recorder.h"

namespace gputriage {
namespace {

/// The first line a shell command prints ("" when it fails or prints nothing).
std::string FirstLineOf(const char* command) {
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return "";
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof buf, pipe) != nullptr;
  const int status = pclose(pipe);
  if (!got || status != 0) return "";
  std::string line(buf);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace

std::map<std::string, std::string> CollectRunContext() {
  std::map<std::string, std::string> context;
  // The code that ran: the commit of the working directory's repository, and
  // whether tracked files differed from it (a run of uncommitted code).
  if (std::string commit = FirstLineOf("git rev-parse HEAD 2>/dev/null"); !commit.empty()) {
    context["git_commit"] = commit;
    context["git_dirty"] =
        FirstLineOf("git status --porcelain --untracked-files=no 2>/dev/null | head -n 1").empty() ? "false" : "true";
  }
  if (char cwd[4096]; getcwd(cwd, sizeof cwd) != nullptr) context["cwd"] = cwd;
  if (const char* user = std::getenv("USER"); user && *user) context["user"] = user;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr)
    context["cuda_visible_devices"] = visible;
  return context;
}

}  // namespace gputriage
