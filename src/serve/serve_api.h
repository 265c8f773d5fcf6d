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
  explicit ServeApi(std::unique_ptr<RunStore> store) : store_(std::move(store)) {}

  /// Answers one GET of an /api/ path; `query` holds its decoded parameters.
  /// Safe from several threads at once (the store is used by one at a time).
  ApiResponse Get(std::string_view path, const std::multimap<std::string, std::string>& query);

  const std::string& store_path() const { return store_->path(); }

  /// Runs kept rendered (complete runs only: an incomplete one still grows).
  static constexpr size_t kCachedReports = 16;
  /// Rows one /api/runs page may ask for.
  static constexpr size_t kMaxPage = 5000;

 private:
  ApiResponse Runs(const std::multimap<std::string, std::string>& query);
  ApiResponse RunDocument(int64_t id, bool charts);
  ApiResponse Compare(const std::multimap<std::string, std::string>& query);
  ApiResponse Experiment(const std::string& name);
  /// The listing of every run, refreshed from the store; a complete run's
  /// findings and figures are read once and kept (they no longer change).
  Status RefreshListings();

  std::mutex mu_;
  std::unique_ptr<RunStore> store_;
  std::map<int64_t, RunListing> listings_;
  struct Rendered {
    std::string report;
    std::string charts;
  };
  std::map<int64_t, Rendered> rendered_;  // at most kCachedReports, the first rendered evicted first
  std::vector<int64_t> rendered_order_;
};

}  // namespace gputriage
