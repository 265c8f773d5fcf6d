#include "src/trackers/mlflow_tracker.h"

#include <cctype>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/util/clock.h"
#include "src/util/exit_code.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxReplyBytes = 16 << 20;
// log-batch limits (MLflow's REST API): 1000 metrics, 100 params, 100 tags per
// request; keys ≤ 250 characters, param and tag values ≤ 250 in a batch.
constexpr size_t kMetricsPerBatch = 1000;
constexpr size_t kParamsPerBatch = 100;
constexpr size_t kMaxValueChars = 250;
// Run and experiment ids: MLflow writes 32 hex digits (experiments: decimal); other
// servers of the REST API use short tokens. 64 characters of [A-Za-z0-9_-] at most.
bool ValidRunId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
  return true;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int64_t Ms(TimeNs t) { return t / 1'000'000; }

std::string Clip(std::string s) {
  if (s.size() > kMaxValueChars) s = s.substr(0, kMaxValueChars - 3) + "...";
  return s;
}

/// obj[key] when `obj` is an object that has it, else null: a reply is not
/// trusted to have the shape the API documents (and nlohmann throws on the wrong one).
const json& Member(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  const auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

/// "finished (exit code 0)", "FAILED (exit code 3)", "killed by signal 15 (Terminated; exit code 143)".
std::string JobExitWords(int exit_code) {
  if (exit_code == 0) return "finished (exit code 0)";
  if (EndedBySignal(exit_code)) return SignalDeathWords(exit_code);
  return fmt::format("FAILED (exit code {})", exit_code);
}

/// A JSON string's text; "" for anything else.
std::string Text(const json& v) { return v.is_string() ? v.get<std::string>() : ""; }

}  // namespace

MlflowOptions MlflowOptionsFromEnvironment() {
  MlflowOptions o;
  o.tracking_uri = Env("MLFLOW_TRACKING_URI");
  o.run_id = Env("MLFLOW_RUN_ID");
  o.experiment_id = Env("MLFLOW_EXPERIMENT_ID");
  o.experiment_name = Env("MLFLOW_EXPERIMENT_NAME");
  o.auth.bearer_token = Env("MLFLOW_TRACKING_TOKEN");
  o.auth.username = Env("MLFLOW_TRACKING_USERNAME");
  o.auth.password = Env("MLFLOW_TRACKING_PASSWORD");
  return o;
}

/// Whether a JSON text nests at most `max_depth` arrays and objects (strings
/// skipped). Checked before a reply becomes a tree: MLflow's replies nest a few
/// levels, and 16 MiB of '[' as a tree costs gigabytes.
bool NestsAtMost(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}
constexpr size_t kMaxReplyDepth = 32;

struct MlflowTracker::Impl {
  std::unique_ptr<HttpClient> http;
  std::string prefix;  // the tracking URI's path ("" or "/mlflow")

  /// One REST call; an error carries MLflow's error_code and message.
  StatusOr<json> Call(const std::string& method, const std::string& api, const json& body,
                      const std::string& query = "") {
    const std::string path = prefix + "/api/2.0/" + api + (query.empty() ? "" : "?" + query);
    ASSIGN_OR_RETURN(HttpReply reply,
                     http->Request(method, path, method == "GET" ? "" : body.dump(-1, ' ', false, json::error_handler_t::replace),
                                   "application/json", kMaxReplyBytes));
    if (!NestsAtMost(reply.body, kMaxReplyDepth))
      return DataLossError(fmt::format("{} {}: HTTP {}: a reply nested deeper than {} levels (not MLflow's JSON); not read",
                                       method, api, reply.status, kMaxReplyDepth));
    json parsed = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
    if (reply.status / 100 != 2) {
      const std::string message = Text(Member(parsed, "message"));
      std::string code = Text(Member(parsed, "error_code"));
      std::string why = Printable(!message.empty() ? (code.empty() ? "error" : code) + ": " + message.substr(0, 500)
                                                    : reply.body.substr(0, 200));
      return IoError(fmt::format("{} {}: HTTP {}: {}", method, api, reply.status, why));
    }
    if (parsed.is_discarded()) return DataLossError(method + " " + api + ": the reply is not JSON");
    return parsed;
  }

  StatusOr<HttpReply> Put(const std::string& path, const std::string& body, const std::string& type) {
    return http->Request("PUT", prefix + path, body, type, kMaxReplyBytes);
  }
};

void JobRunNotice::Set(JobRun run) {
  std::lock_guard<std::mutex> lock(mu_);
  run_ = std::move(run);
}

std::optional<JobRunNotice::JobRun> JobRunNotice::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return run_;
}

std::string MlflowServerOf(std::string uri) {
  while (!uri.empty() && uri.back() == '/') uri.pop_back();
  return uri;
}

StatusOr<std::unique_ptr<MlflowTracker>> MlflowTracker::Deferred(const MlflowOptions& options, TimeNs started_ns,
                                                                  std::shared_ptr<const JobRunNotice> job_run) {
  ASSIGN_OR_RETURN(HttpTarget target, ParseHttpUrl(options.tracking_uri, ""));
  std::unique_ptr<MlflowTracker> t(new MlflowTracker());
  t->base_ = options.tracking_uri;
  t->options_ = options;
  t->started_ns_ = started_ns;
  t->job_run_ = std::move(job_run);
  t->ready_at_ms_ = MonotonicMs() + (t->options_.run_id.empty() && t->job_run_ ? kJobRunGraceMs : 0);
  t->impl_ = std::make_unique<Impl>();
  t->impl_->prefix = target.path == "/" ? "" : target.path;
  while (!t->impl_->prefix.empty() && t->impl_->prefix.back() == '/') t->impl_->prefix.pop_back();
  t->impl_->http = std::make_unique<HttpClient>(target, options.timeout_ms, options.auth);
  return t;
}

StatusOr<std::unique_ptr<MlflowTracker>> MlflowTracker::Start(const MlflowOptions& options, TimeNs started_ns) {
  ASSIGN_OR_RETURN(std::unique_ptr<MlflowTracker> t, Deferred(options, started_ns, nullptr));
  RETURN_IF_ERROR(t->EnsureOpen());
  return t;
}

bool MlflowTracker::Ready() const {
  if (!run_id_.empty() || MonotonicMs() >= ready_at_ms_) return true;
  const auto job = job_run_ ? job_run_->Get() : std::nullopt;
  return job.has_value();
}

Status MlflowTracker::EnsureOpen() {
  if (!run_id_.empty()) return Status::Ok();
  MlflowOptions options = options_;
  bool into_jobs_run = false;
  if (options.run_id.empty() && job_run_) {
    // The job's own run, where the job's MLflow logs to this server (a run on
    // another server is out of reach: the figures get a run of their own here).
    if (auto job = job_run_->Get(); job && MlflowServerOf(job->tracking_uri) == MlflowServerOf(base_)) {
      options.run_id = job->run_id;
      into_jobs_run = true;
    }
  }
  // Every call of the opening shares one deadline (and LimitTo's, if sooner).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  if (limit_ && *limit_ < deadline) deadline = *limit_;
  impl_->http->SetDeadline(deadline);
  const Status opened = Open(options);
  impl_->http->SetDeadline(limit_);
  if (!opened.ok())
    return Status(opened.code(), "the run was not opened: " + opened.message() + "; not logged to MLflow (the run is "
                                 "stored locally)");
  in_jobs_run_ = into_jobs_run;
  return Status::Ok();
}

Status MlflowTracker::Open(const MlflowOptions& options) {
  Impl& m = *impl_;
  json run;
  if (!options.run_id.empty()) {
    // The job's run: gputriage logs into it and leaves its status to the job.
    ASSIGN_OR_RETURN(json got, m.Call("GET", "mlflow/runs/get", {}, "run_id=" + UrlEncode(options.run_id)));
    run = Member(got, "run");
  } else {
    std::string experiment = options.experiment_id;
    if (experiment.empty() && !options.experiment_name.empty()) {
      auto found = m.Call("GET", "mlflow/experiments/get-by-name", {}, "experiment_name=" + UrlEncode(options.experiment_name));
      if (found.ok()) {
        experiment = Text(Member(Member(*found, "experiment"), "experiment_id"));
      } else {
        auto created = m.Call("POST", "mlflow/experiments/create", {{"name", options.experiment_name}});
        if (!created.ok()) {
          // Another recorder may have made it since: look again before giving up.
          auto again = m.Call("GET", "mlflow/experiments/get-by-name", {}, "experiment_name=" + UrlEncode(options.experiment_name));
          if (!again.ok()) return created.status();
          experiment = Text(Member(Member(*again, "experiment"), "experiment_id"));
        } else {
          experiment = Text(Member(*created, "experiment_id"));
        }
      }
    }
    if (experiment.empty()) experiment = "0";  // MLflow's Default experiment
    json tags = json::array();
    for (const auto& [k, v] : options.tags) tags.push_back({{"key", k}, {"value", Clip(v)}});
    json request = {{"experiment_id", experiment}, {"start_time", Ms(started_ns_)}, {"tags", tags}};
    if (!options.run_name.empty()) request["run_name"] = options.run_name;
    ASSIGN_OR_RETURN(json created, m.Call("POST", "mlflow/runs/create", request));
    run = Member(created, "run");
  }
  const json& info = Member(run, "info");
  std::string run_id = Text(Member(info, "run_id"));
  if (run_id.empty()) run_id = Text(Member(info, "run_uuid"));
  if (run_id.empty()) return DataLossError(options.tracking_uri + ": the server's run has no run_id");
  // The id goes into every later call (and the job's report): MLflow's are 32 hex
  // digits; anything long or with other characters is refused here.
  if (!ValidRunId(run_id))
    return DataLossError(fmt::format("{}: the server's run_id is not an MLflow run id ({} characters, starting \"{}\")",
                                     options.tracking_uri, run_id.size(), Printable(run_id.substr(0, 40))));
  experiment_id_ = Text(Member(info, "experiment_id"));
  if (!experiment_id_.empty() && !ValidRunId(experiment_id_)) experiment_id_.clear();
  artifact_uri_ = Text(Member(info, "artifact_uri"));
  run_id_ = std::move(run_id);
  created_ = options.run_id.empty();  // ours, so ours to end
  return Status::Ok();
}

MlflowTracker::~MlflowTracker() = default;

std::string MlflowTracker::Describe() const {
  return "MLflow " + base_ + (run_id_.empty() ? "" : " run " + run_id_);
}

Status MlflowTracker::Log(const std::vector<TrackerPoint>& points) {
  RETURN_IF_ERROR(EnsureOpen());
  json metrics = json::array();
  const auto send = [&]() -> Status {
    if (metrics.empty()) return Status::Ok();
    auto r = impl_->Call("POST", "mlflow/runs/log-batch", {{"run_id", run_id_}, {"metrics", metrics}});
    metrics = json::array();
    return r.status();
  };
  for (const auto& p : points)
    for (const auto& [key, value] : p.values) {
      metrics.push_back({{"key", key}, {"value", value}, {"timestamp", Ms(p.t_ns)}, {"step", p.step}});
      if (metrics.size() == kMetricsPerBatch) RETURN_IF_ERROR(send());
    }
  return send();
}

void MlflowTracker::LimitTo(std::chrono::steady_clock::time_point deadline) {
  limit_ = deadline;
  impl_->http->SetDeadline(deadline);
}

Status MlflowTracker::Finish(const TrackerSummary& summary) {
  RETURN_IF_ERROR(EnsureOpen());
  Impl& m = *impl_;
  // Params are immutable in MLflow: under their own prefix, so the job's own
  // params never collide with them; a rejected batch costs only the params.
  Status params_status;
  json params = json::array();
  const auto send_params = [&]() {
    if (params.empty()) return;
    auto r = m.Call("POST", "mlflow/runs/log-batch", {{"run_id", run_id_}, {"params", params}});
    if (!r.ok() && params_status.ok()) params_status = r.status();
    params = json::array();
  };
  for (const auto& [k, v] : params_) {
    params.push_back({{"key", Clip("gputriage." + k)}, {"value", Clip(v.empty() ? "-" : v)}});
    if (params.size() == kParamsPerBatch) send_params();
  }
  send_params();

  // Verdicts as tags (searchable: tags."gputriage.verdict.input_bound" = 'high'),
  // the summary figures as metrics.
  json tags = json::array(), metrics = json::array();
  std::string verdicts;
  for (const auto& f : summary.findings) {
    verdicts += (verdicts.empty() ? "" : ", ") + f.verdict + " (" + SeverityName(f.severity) + ")";
    tags.push_back({{"key", "gputriage.verdict." + f.verdict}, {"value", SeverityName(f.severity)}});
  }
  tags.push_back({{"key", "gputriage.verdicts"}, {"value", Clip(verdicts.empty() ? "none" : verdicts)}});
  // How the job ended, in words: the run's status says FAILED or KILLED only in
  // a run gputriage made, and never why (a job's own run may say FINISHED).
  tags.push_back({{"key", "gputriage.job_exit"}, {"value", JobExitWords(summary.exit_code)}});
  if (!summary.findings.empty()) tags.push_back({{"key", "gputriage.top_verdict"}, {"value", summary.findings[0].verdict}});
  for (const auto& [k, v] : summary.figures)
    metrics.push_back({{"key", "gputriage/summary/" + k}, {"value", v}, {"timestamp", Ms(summary.ended_ns)}, {"step", 0}});
  RETURN_IF_ERROR(m.Call("POST", "mlflow/runs/log-batch", {{"run_id", run_id_}, {"tags", tags}, {"metrics", metrics}}).status());

  // The reports as artifacts, where the server serves the run's artifact store
  // (mlflow-artifacts:/..., MLflow's default since 2.0).
  Status artifacts_status;
  const std::string scheme = "mlflow-artifacts:";
  if (artifact_uri_.rfind(scheme, 0) == 0) {
    std::string where = artifact_uri_.substr(scheme.size());
    if (where.rfind("//", 0) == 0) where = where.substr(where.find('/', 2) == std::string::npos ? where.size() : where.find('/', 2));
    while (!where.empty() && where.front() == '/') where.erase(0, 1);
    for (const auto& [name, body, type] : {std::tuple<std::string, const std::string&, std::string>{
                                               "report.json", summary.report_json, "application/json"},
                                           {"report.txt", summary.report_text, "text/plain"}}) {
      auto r = m.Put("/api/2.0/mlflow-artifacts/artifacts/" + where + "/gputriage/" + name, body, type);
      if (!r.ok()) return r.status();
      if (r->status / 100 != 2 && artifacts_status.ok())
        artifacts_status = IoError(fmt::format("uploading gputriage/{}: HTTP {}", name, r->status));
    }
  } else {
    artifacts_status = UnimplementedError("the run's artifact store (" + artifact_uri_ +
                                          ") is not served by the tracking server: the report was not uploaded");
  }

  if (created_) {
    // The job's exit: 0 finished, a signal (128 + N) killed, else failed.
    const char* status = summary.exit_code == 0 ? "FINISHED" : EndedBySignal(summary.exit_code) ? "KILLED" : "FAILED";
    RETURN_IF_ERROR(
        m.Call("POST", "mlflow/runs/update", {{"run_id", run_id_}, {"status", status}, {"end_time", Ms(summary.ended_ns)}})
            .status());
  }
  if (!params_status.ok()) return IoError("the run's settings were not logged as params: " + params_status.message());
  return artifacts_status;
}

}  // namespace gputriage
