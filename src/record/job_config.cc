#include "src/record/job_config.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

#include "src/util/strings.h"

namespace gputriage {
namespace {

bool KeyCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == ':' || c == '/';
}

/// Why `key` cannot be a job's setting ("" when it can). Job settings are
/// dotted (dataloader.num_workers, config.lr): the recorder's own context
/// (command, cwd, workload) has no dot, and the user's --tag values live under
/// tag., so a job can neither overwrite nor impersonate them.
std::string KeyProblem(std::string_view key) {
  if (key.empty()) return "an empty key";
  if (key.size() > JobConfigChannel::kMaxKeyBytes) return "a key longer than 128 bytes";
  for (char c : key)
    if (!KeyCharacter(c)) return "a key with a character other than letters, digits and _ . - : /";
  if (key.find('.') == std::string_view::npos || key.front() == '.' || key.back() == '.')
    return "a key without a dotted namespace (dataloader.num_workers, config.lr)";
  if (key.substr(0, 4) == "tag.") return "a key under tag. (kept for --tag)";
  return "";
}

/// VALUE with \t, \n, \r and \\ unescaped; false on a bad escape.
bool Unescape(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\') {
      out->push_back(in[i]);
      continue;
    }
    if (++i == in.size()) return false;
    switch (in[i]) {
      case 't': out->push_back('\t'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case '\\': out->push_back('\\'); break;
      default: return false;
    }
  }
  return true;
}

}  // namespace

JobConfig ParseJobConfig(std::string_view text) {
  JobConfig out;
  const auto reject = [&out](int64_t line, const std::string& why) {
    if (out.rejected_lines++ == 0) out.first_problem = "line " + std::to_string(line) + ": " + why;
  };
  int64_t line_number = 0;
  std::string value;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (end == std::string_view::npos) break;  // a write in progress
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    ++line_number;
    const size_t tab1 = line.find('\t');
    const size_t tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos) {
      reject(line_number, "not PID<tab>KEY<tab>VALUE");
      continue;
    }
    const std::string_view pid = line.substr(0, tab1);
    const std::string_view key = line.substr(tab1 + 1, tab2 - tab1 - 1);
    const std::string_view raw = line.substr(tab2 + 1);
    bool pid_ok = !pid.empty() && pid.size() <= 10;
    for (char c : pid) pid_ok = pid_ok && c >= '0' && c <= '9';
    if (!pid_ok) {
      reject(line_number, "the process id is not a number");
      continue;
    }
    if (key == kJobRequestKey) {
      std::string request;
      if (raw.size() <= 256 && Unescape(raw, &request)) out.requests.push_back(std::move(request));
      else reject(line_number, "a request that is too long or badly escaped");
      continue;
    }
    if (key.substr(0, 10) == "gputriage.") {
      reject(line_number, "a key under gputriage. (the recorder's own)");
      continue;
    }
    if (std::string why = KeyProblem(key); !why.empty()) {
      reject(line_number, why);
      continue;
    }
    if (raw.size() > JobConfigChannel::kMaxValueBytes || !Unescape(raw, &value)) {
      reject(line_number, raw.size() > JobConfigChannel::kMaxValueBytes ? "a value longer than 4096 bytes"
                                                                         : "a value with a bad escape");
      continue;
    }
    // Who a process is in a distributed run differs by process: kept per process
    // (bounded), not as one job-wide setting that the last rank to write would win.
    if (IsProcessKey(key)) {
      uint64_t number = 0;
      std::from_chars(pid.data(), pid.data() + pid.size(), number);  // digits only, at most 10: checked above
      const auto process = static_cast<uint32_t>(std::min<uint64_t>(number, UINT32_MAX));
      if (out.by_process.size() >= JobConfig::kMaxProcesses && !out.by_process.count(process)) {
        reject(line_number, "more than 65536 processes");
        continue;
      }
      out.by_process[process][std::string(key)] = value;
      continue;
    }
    auto it = out.settings.find(std::string(key));
    if (it == out.settings.end()) {
      if (out.settings.size() >= JobConfigChannel::kMaxKeys) {
        reject(line_number, "more than 1000 keys");
        continue;
      }
      out.settings.emplace(std::string(key), value);
    } else {
      it->second = value;
    }
  }
  return out;
}

StatusOr<std::unique_ptr<JobConfigChannel>> JobConfigChannel::Create() {
  std::unique_ptr<JobConfigChannel> channel(new JobConfigChannel());
  // Not close-on-exec: the job inherits it (like the marker ring).
  channel->fd_ = memfd_create("gputriage-config", 0);
  if (channel->fd_ < 0) return IoError(std::string("job configuration: memfd_create: ") + std::strerror(errno));
  return channel;
}

JobConfigChannel::~JobConfigChannel() {
  if (fd_ >= 0) close(fd_);
}

std::vector<std::string> JobConfigChannel::TakeRequests() {
  // New bytes only: a request is a short line, checked about ten times a second.
  std::string text;
  char buf[4096];
  for (size_t at = requests_read_to_; at < kMaxBytes;) {
    const ssize_t n = pread(fd_, buf, sizeof buf, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
  }
  const size_t complete = text.rfind('\n');
  if (complete == std::string::npos) return {};
  text.resize(complete + 1);
  requests_read_to_ += text.size();
  return ParseJobConfig(text).requests;
}

JobConfig JobConfigChannel::Read() const {
  std::string text;
  text.resize(kMaxBytes + 1);
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = pread(fd_, text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  const bool truncated = got > kMaxBytes;
  text.resize(std::min(got, kMaxBytes));
  JobConfig out = ParseJobConfig(text);
  out.truncated = truncated;
  return out;
}

}  // namespace gputriage
