#pragma once
// libpq, loaded when a postgres:// store is first opened, not linked: the
// binary then runs where libpq is absent (the SQLite store needs nothing), and
// the host's own libpq brings its Kerberos, LDAP and TLS setup with it. Debian
// ships libpq's static archive, but not those of the Kerberos and LDAP
// libraries it needs (docs/packaging.md).
#include <libpq-fe.h>

#include "gputriage/status.h"

namespace gputriage {

/// The libpq entry points the PostgreSQL adapter calls, by their own names.
struct Libpq {
  decltype(&::PQconnectdbParams) PQconnectdbParams;
  decltype(&::PQstatus) PQstatus;
  decltype(&::PQerrorMessage) PQerrorMessage;
  decltype(&::PQsetNoticeProcessor) PQsetNoticeProcessor;
  decltype(&::PQreset) PQreset;
  decltype(&::PQfinish) PQfinish;
  decltype(&::PQexec) PQexec;
  decltype(&::PQexecParams) PQexecParams;
  decltype(&::PQsendQueryParams) PQsendQueryParams;
  decltype(&::PQsetSingleRowMode) PQsetSingleRowMode;
  decltype(&::PQgetResult) PQgetResult;
  decltype(&::PQresultStatus) PQresultStatus;
  decltype(&::PQresultErrorMessage) PQresultErrorMessage;
  decltype(&::PQresultErrorField) PQresultErrorField;
  decltype(&::PQntuples) PQntuples;
  decltype(&::PQnfields) PQnfields;
  decltype(&::PQgetvalue) PQgetvalue;
  decltype(&::PQgetisnull) PQgetisnull;
  decltype(&::PQclear) PQclear;
  decltype(&::PQgetCancel) PQgetCancel;
  decltype(&::PQcancel) PQcancel;
  decltype(&::PQfreeCancel) PQfreeCancel;
};

/// Where to look for libpq instead of the loader's search ("libpq.so.5").
inline constexpr const char* kLibpqPathEnv = "GPUTRIAGE_LIBPQ";

/// libpq, loaded once per process ($GPUTRIAGE_LIBPQ, else libpq.so.5 on the
/// loader's path); an error that says how to install it when there is none.
StatusOr<const Libpq*> LoadLibpq();

}  // namespace gputriage
