// `gputriage serve`'s JSON API over the run store (docs/json-schema.md, "serve"):
//   GET /api/runs?name=&tag=&verdict=&q=&sort=&order=&limit=&offset=
//   GET /api/runs/ID/report     the report document (`diagnose ID --json`)
//   GET /api/runs/ID/charts     the chart series (the HTML report's)
//   GET /api/compare?a=ID&b=ID  `compare A B --json`
//   GET /api/experiments/NAME   `runs --name NAME --json`: the trend, regressions marked
// Pure request-in, answer-out: the HTTP adapter (serve_server.cc) and the tests
// call the same Handle. The store is opened for reading and never changed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/status.h"
#include "src/report/runs_json.h"
#include "src/store/run_store.h"

namespace gputriage {

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

class ServeApi {
 public:
  /// Opens `store_location` (a file or postgresql:// URL) for reading.
  static StatusOr<std::unique_ptr<ServeApi>> Open(const std::string& store_location);
  /// `location` opens more readers of the same store for the requests that
  /// diagnose runs (see ReaderLease).
  ServeApi(std::unique_ptr<RunStore> store, std::string location)
      : store_(std::move(store)), location_(std::move(location)) {}

  /// Answers one GET of an /api/ path; `query` holds its decoded parameters.
  /// Safe from several threads at once. The listing and the cache share one
  /// lock and one store connection; a request that diagnoses runs (a report
  /// not cached, a comparison, an experiment) does so outside that lock on a
  /// reader of its own, at most kDiagnosesAtOnce together (503 beyond), so a
  /// slow comparison never holds up /api/runs (it had: p50 8.4 s).
  ApiResponse Get(std::string_view path, const std::multimap<std::string, std::string>& query);

  const std::string& store_path() const { return store_->path(); }

  /// Runs kept rendered (complete runs only: an incomplete one still grows).
  static constexpr size_t kCachedReports = 16;
  /// Rows one /api/runs page may ask for.
  static constexpr size_t kMaxPage = 5000;
  /// Requests diagnosing runs at once: serve's handler threads are 4, so one
  /// is always left for listings and pages.
  static constexpr int kDiagnosesAtOnce = 3;

 private:
  ApiResponse Runs(const std::multimap<std::string, std::string>& query);
  ApiResponse RunDocument(int64_t id, bool charts);
  ApiResponse Compare(const std::multimap<std::string, std::string>& query);
  ApiResponse Experiment(const std::string& name);
  /// The listing of every run, refreshed from the store; a complete run's
  /// findings and figures are read once and kept (they no longer change).
  Status RefreshListings();

  /// A store reader for one diagnosing request and one of its slots; empty
  /// (with an error response) when all slots are taken or the store cannot be opened.
  class ReaderLease;
  std::unique_ptr<RunStore> TakeReader(ApiResponse* refused);
  void GiveBack(std::unique_ptr<RunStore> reader);

  std::mutex mu_;  // listings_, rendered_ and store_
  std::unique_ptr<RunStore> store_;
  std::string location_;
  std::mutex readers_mu_;  // readers_ and diagnosing_
  std::vector<std::unique_ptr<RunStore>> readers_;  // idle readers, kept for the next request
  int diagnosing_ = 0;
  std::map<int64_t, RunListing> listings_;
  struct Rendered {
    std::string report;
    std::string charts;
  };
  std::map<int64_t, Rendered> rendered_;  // at most kCachedReports, the first rendered evicted first
  std::vector<int64_t> rendered_order_;
};

}  // namespace gputriage
