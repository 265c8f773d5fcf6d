#include "src/serve/serve_api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "gputriage/report.h"
#include "src/report/chart_data.h"
#include "src/report/experiment_report.h"
#include "src/store/run_history.h"
#include "src/verdicts/compare.h"
#include "src/verdicts/history.h"

namespace gputriage {
namespace {

ApiResponse Error(int status, const std::string& message) { return {status, "application/json", RenderErrorJson(message)}; }
/// A store's failure: 404 for what is not there (a run, the store itself), else 500.
ApiResponse Error(const Status& s) { return Error(s.code() == StatusCode::kNotFound ? 404 : 500, s.message()); }

std::string Param(const std::multimap<std::string, std::string>& q, const std::string& key) {
  auto it = q.find(key);
  return it == q.end() ? std::string() : it->second;
}

std::optional<int64_t> ParseId(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0) return std::nullopt;
  return v;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& haystack, const std::string& needle_lower) {
  return needle_lower.empty() || Lower(haystack).find(needle_lower) != std::string::npos;
}

/// "key" (the tag is set) or "key=value" (exactly); tags are stored as "tag.key".
bool HasTag(const RunInfo& r, const std::string& filter) {
  const size_t eq = filter.find('=');
  const std::string key = "tag." + filter.substr(0, eq);
  auto it = r.metadata.find(key);
  if (it == r.metadata.end()) return false;
  return eq == std::string::npos || it->second == filter.substr(eq + 1);
}

/// The text columns a listing sorts by; null for a numeric key.
const std::string* TextKey(const RunListing& r, const std::string& key) {
  if (key == "name") return &r.info.name;
  if (key == "status") return &r.info.status;
  if (key == "command") return &r.info.command;
  if (key == "host") return &r.info.host;
  return nullptr;
}

/// A sort key of a listing: the run's own columns, else one of its figures
/// (runs without that figure sort last either way).
std::optional<double> NumericKey(const RunListing& r, const std::string& key) {
  if (key == "id") return static_cast<double>(r.info.id);
  if (key == "started") return static_cast<double>(r.info.started_ns);
  if (key == "duration") return static_cast<double>(r.info.ended_ns - r.info.started_ns);
  if (key == "gpus") return r.info.devices;
  if (key == "samples") return static_cast<double>(r.info.samples);
  if (key == "exit_code") return r.info.exit_code ? std::optional<double>(*r.info.exit_code) : std::nullopt;
  auto it = r.figures.find(key);
  if (it == r.figures.end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

}  // namespace

StatusOr<std::unique_ptr<ServeApi>> ServeApi::Open(const std::string& store_location) {
  ASSIGN_OR_RETURN(auto store, RunStore::OpenForReading(store_location));
  return std::make_unique<ServeApi>(std::move(store), store_location);
}

std::unique_ptr<RunStore> ServeApi::TakeReader(ApiResponse* refused) {
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    if (diagnosing_ >= kDiagnosesAtOnce) {
      *refused = Error(503, "busy: " + std::to_string(kDiagnosesAtOnce) + " runs are being diagnosed; try again shortly");
      return nullptr;
    }
    ++diagnosing_;
    if (!readers_.empty()) {
      auto reader = std::move(readers_.back());
      readers_.pop_back();
      return reader;
    }
  }
  auto opened = RunStore::OpenForReading(location_);
  if (opened.ok()) return std::move(*opened);
  *refused = Error(opened.status());
  std::lock_guard<std::mutex> lock(readers_mu_);
  --diagnosing_;
  return nullptr;
}

void ServeApi::GiveBack(std::unique_ptr<RunStore> reader) {
  std::lock_guard<std::mutex> lock(readers_mu_);
  --diagnosing_;
  if (reader) readers_.push_back(std::move(reader));
}

/// Holds a reader and its slot for one request; gives both back at its end.
class ServeApi::ReaderLease {
 public:
  explicit ReaderLease(ServeApi& api) : api_(api), reader_(api.TakeReader(&refused_)) {}
  ~ReaderLease() {
    if (reader_) api_.GiveBack(std::move(reader_));
  }
  RunStore* get() const { return reader_.get(); }
  const ApiResponse& refused() const { return refused_; }

 private:
  ServeApi& api_;
  ApiResponse refused_;
  std::unique_ptr<RunStore> reader_;
};

ApiResponse ServeApi::Get(std::string_view path, const std::multimap<std::string, std::string>& query) {
  if (path == "/api/runs" || path == "/api/runs/") {
    std::lock_guard<std::mutex> lock(mu_);
    return Runs(query);
  }
  if (path == "/api/compare") return Compare(query);
  constexpr std::string_view kRuns = "/api/runs/";
  if (path.substr(0, kRuns.size()) == kRuns) {
    std::string_view rest = path.substr(kRuns.size());
    const size_t slash = rest.find('/');
    const auto id = ParseId(rest.substr(0, slash));
    const std::string_view what = slash == std::string_view::npos ? "report" : rest.substr(slash + 1);
    if (!id) return Error(400, "run id " + std::string(rest.substr(0, slash)) + ": expected a whole number from 1");
    if (what == "report" || what == "charts") return RunDocument(*id, what == "charts");
    return Error(404, "no such API path: " + std::string(path) + " (a run has /report and /charts)");
  }
  constexpr std::string_view kExperiments = "/api/experiments/";
  if (path.substr(0, kExperiments.size()) == kExperiments && path.size() > kExperiments.size())
    return Experiment(std::string(path.substr(kExperiments.size())));
  return Error(404, "no such API path: " + std::string(path) +
                        " (/api/runs, /api/runs/ID/report, /api/runs/ID/charts, /api/compare?a=ID&b=ID, /api/experiments/NAME)");
}

Status ServeApi::RefreshListings() {
  ASSIGN_OR_RETURN(auto runs, store_->ListRuns());
  std::set<int64_t> seen;
  for (auto& info : runs) {
    seen.insert(info.id);
    auto it = listings_.find(info.id);
    // A complete run kept already is final; anything else is read again.
    if (it != listings_.end() && it->second.info.status == "complete" && info.status == "complete") continue;
    RunListing row;
    // Findings and figures are a finished run's: one still recording has none
    // yet, and working its figures out from its samples on every listing would
    // cost a diagnosis per request.
    if (info.status == "complete") {
      ASSIGN_OR_RETURN(row.findings, store_->LoadFindings(info.id));
      // Stored figures, else worked out from the run's samples and steps (an older gputriage kept it).
      auto history = LoadHistoryRun(*store_, info);
      if (history.ok()) row.figures = std::move(history->figures);
    }
    row.info = std::move(info);
    listings_[row.info.id] = std::move(row);
  }
  for (auto it = listings_.begin(); it != listings_.end();)  // runs deleted from the store
    it = seen.count(it->first) ? std::next(it) : listings_.erase(it);
  return Status::Ok();
}

ApiResponse ServeApi::Runs(const std::multimap<std::string, std::string>& query) {
  if (Status s = RefreshListings(); !s.ok()) return Error(s);
  const std::string name = Lower(Param(query, "name"));
  const std::string text = Lower(Param(query, "q"));
  const std::string verdict = Param(query, "verdict");
  std::vector<std::string> tags;
  for (auto [it, end] = query.equal_range("tag"); it != end; ++it)
    if (!it->second.empty()) tags.push_back(it->second);
  const std::string sort = Param(query, "sort").empty() ? "id" : Param(query, "sort");
  const std::string order = Param(query, "order").empty() ? "desc" : Param(query, "order");
  if (order != "asc" && order != "desc") return Error(400, "order=" + order + ": expected asc or desc");
  size_t limit = 200, offset = 0;
  if (auto l = Param(query, "limit"); !l.empty()) {
    auto v = ParseId(l);
    if (!v || static_cast<size_t>(*v) > kMaxPage) return Error(400, "limit=" + l + ": expected 1 to " + std::to_string(kMaxPage));
    limit = static_cast<size_t>(*v);
  }
  if (auto o = Param(query, "offset"); !o.empty()) {
    auto v = o == "0" ? std::optional<int64_t>(0) : ParseId(o);
    if (!v) return Error(400, "offset=" + o + ": expected a whole number");
    offset = static_cast<size_t>(*v);
  }
  const bool by_text = TextKey(RunListing{}, sort) != nullptr;
  if (!by_text && sort != "id" && sort != "started" && sort != "duration" && sort != "gpus" && sort != "samples" &&
      sort != "exit_code" && FindFigure(sort) == nullptr)
    return Error(400, "sort=" + sort + ": expected id, started, duration, name, status, command, host, gpus, samples, "
                      "exit_code or a figure (step_time_ms, gpu_util_mean_percent, ...)");
  std::set<std::string> all_verdicts;
  std::vector<const RunListing*> matches;
  for (const auto& entry : listings_) {
    const RunListing& r = entry.second;  // not a structured binding: lambdas below capture it
    for (const auto& f : r.findings) all_verdicts.insert(f.verdict);
    if (!Contains(r.info.name, name)) continue;
    if (!text.empty() && !Contains(r.info.command, text) && !Contains(r.info.name, text) && !Contains(r.info.host, text)) continue;
    if (!verdict.empty() && std::none_of(r.findings.begin(), r.findings.end(), [&](const Finding& f) { return f.verdict == verdict; }))
      continue;
    if (!std::all_of(tags.begin(), tags.end(), [&](const std::string& t) { return HasTag(r.info, t); })) continue;
    matches.push_back(&r);
  }
  const bool desc = order == "desc";
  std::stable_sort(matches.begin(), matches.end(), [&](const RunListing* a, const RunListing* b) {
    if (by_text) return desc ? *TextKey(*b, sort) < *TextKey(*a, sort) : *TextKey(*a, sort) < *TextKey(*b, sort);
    const auto x = NumericKey(*a, sort), y = NumericKey(*b, sort);
    if (!x || !y) return x.has_value() && !y.has_value();  // missing last
    return desc ? *y < *x : *x < *y;
  });
  const size_t total = matches.size();
  std::vector<const RunListing*> page;
  for (size_t i = offset; i < matches.size() && page.size() < limit; ++i) page.push_back(matches[i]);
  return {200, "application/json", RenderRunsPageJson(page, total, offset, limit, {all_verdicts.begin(), all_verdicts.end()})};
}

ApiResponse ServeApi::RunDocument(int64_t id, bool charts) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = rendered_.find(id); it != rendered_.end())
      return {200, "application/json", charts ? it->second.charts : it->second.report};
  }
  ReaderLease reader(*this);
  if (reader.get() == nullptr) return reader.refused();
  auto stored = DiagnoseStoredRun(*reader.get(), id);
  if (!stored.ok()) return Error(stored.status());
  JsonOptions json;
  json.indent = -1;
  Rendered r{RenderJson(stored->run, stored->diagnosis, json), RenderChartJson(stored->run, stored->diagnosis)};
  ApiResponse out{200, "application/json", charts ? r.charts : r.report};
  // Only a finished run's documents are final; a recording in progress is read again.
  std::lock_guard<std::mutex> lock(mu_);
  if (!listings_.count(id)) (void)RefreshListings();
  auto listed = listings_.find(id);
  if (listed != listings_.end() && listed->second.info.status == "complete" && !rendered_.count(id)) {
    if (rendered_.size() >= kCachedReports) {
      rendered_.erase(rendered_order_.front());
      rendered_order_.erase(rendered_order_.begin());
    }
    rendered_[id] = std::move(r);
    rendered_order_.push_back(id);
  }
  return out;
}

ApiResponse ServeApi::Compare(const std::multimap<std::string, std::string>& query) {
  const auto a = ParseId(Param(query, "a")), b = ParseId(Param(query, "b"));
  if (!a || !b) return Error(400, "compare needs two run ids: /api/compare?a=ID&b=ID");
  ReaderLease reader(*this);
  if (reader.get() == nullptr) return reader.refused();
  // Each side as `compare` diagnoses it: recorded settings, no judging against its experiment.
  auto run_a = DiagnoseStoredRun(*reader.get(), *a, /*judge_history=*/false);
  if (!run_a.ok()) return Error(run_a.status());
  auto run_b = DiagnoseStoredRun(*reader.get(), *b, /*judge_history=*/false);
  if (!run_b.ok()) return Error(run_b.status());
  const Comparison c = CompareRuns("run " + std::to_string(*a), run_a->run, run_a->diagnosis, "run " + std::to_string(*b),
                                   run_b->run, run_b->diagnosis);
  return {200, "application/json", RenderComparisonJson(c)};
}

ApiResponse ServeApi::Experiment(const std::string& name) {
  ReaderLease reader(*this);
  if (reader.get() == nullptr) return reader.refused();
  auto runs = LoadExperiment(*reader.get(), name);
  if (!runs.ok()) return Error(runs.status());
  if (runs->empty()) return Error(404, "no complete run is named " + name);
  return {200, "application/json", RenderExperimentJson(name, *runs)};
}

}  // namespace gputriage
