#include "src/store/libpq_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace gputriage {
namespace {

struct Loaded {
  Libpq lib{};
  Status status;
};

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
  return *out != nullptr;
}

Loaded Load() {
  Loaded out;
  const char* env = std::getenv(kLibpqPathEnv);
  const std::string path = env != nullptr && *env != '\0' ? env : "libpq.so.5";
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    out.status = NotFoundError(
        "a PostgreSQL store needs libpq, which could not be loaded (" + path + ": " + (why ? why : "not loadable") +
        "); install it (Debian/Ubuntu: apt-get install libpq5; RHEL/Rocky: dnf install libpq; conda: conda install "
        "libpq) or set " + kLibpqPathEnv + " to its path (a store on a file, SQLite, needs nothing)");
    return out;
  }
  Libpq& l = out.lib;
  std::string missing;
  Bind(handle, "PQconnectdbParams", &l.PQconnectdbParams, &missing);
  Bind(handle, "PQstatus", &l.PQstatus, &missing);
  Bind(handle, "PQerrorMessage", &l.PQerrorMessage, &missing);
  Bind(handle, "PQsetNoticeProcessor", &l.PQsetNoticeProcessor, &missing);
  Bind(handle, "PQreset", &l.PQreset, &missing);
  Bind(handle, "PQfinish", &l.PQfinish, &missing);
  Bind(handle, "PQexec", &l.PQexec, &missing);
  Bind(handle, "PQexecParams", &l.PQexecParams, &missing);
  Bind(handle, "PQsendQueryParams", &l.PQsendQueryParams, &missing);
  Bind(handle, "PQsetSingleRowMode", &l.PQsetSingleRowMode, &missing);
  Bind(handle, "PQgetResult", &l.PQgetResult, &missing);
  Bind(handle, "PQresultStatus", &l.PQresultStatus, &missing);
  Bind(handle, "PQresultErrorMessage", &l.PQresultErrorMessage, &missing);
  Bind(handle, "PQresultErrorField", &l.PQresultErrorField, &missing);
  Bind(handle, "PQntuples", &l.PQntuples, &missing);
  Bind(handle, "PQnfields", &l.PQnfields, &missing);
  Bind(handle, "PQgetvalue", &l.PQgetvalue, &missing);
  Bind(handle, "PQgetisnull", &l.PQgetisnull, &missing);
  Bind(handle, "PQclear", &l.PQclear, &missing);
  Bind(handle, "PQgetCancel", &l.PQgetCancel, &missing);
  Bind(handle, "PQcancel", &l.PQcancel, &missing);
  Bind(handle, "PQfreeCancel", &l.PQfreeCancel, &missing);
  if (!missing.empty()) {
    // PQsetSingleRowMode, the newest of these, is in libpq 9.2 (2012) and later.
    out.status = UnimplementedError(path + " is not a usable libpq (it lacks " + missing +
                                         "; libpq 9.2 or newer is needed)");
    dlclose(handle);
  }
  return out;  // the handle of a usable libpq stays open for the process
}

}  // namespace

StatusOr<const Libpq*> LoadLibpq() {
  static const Loaded loaded = Load();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.lib;
}

}  // namespace gputriage
