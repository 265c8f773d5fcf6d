#include "src/trackers/job_feed.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace gputriage {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<JobFeed>> JobFeed::Create() {
  std::unique_ptr<JobFeed> feed(new JobFeed());
  feed->fd_ = memfd_create("gputriage-feed", 0);  // inherited by the job
  if (feed->fd_ < 0) return IoError(std::string("the job's feed: memfd_create: ") + std::strerror(errno));
  return feed;
}

JobFeed::~JobFeed() {
  if (fd_ >= 0) close(fd_);
}

Status JobFeed::Append(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(std::string("the job's feed: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  size_ += done;
  return Status::Ok();
}

Status JobFeed::Log(const std::vector<TrackerPoint>& points) {
  std::string text;
  for (const auto& p : points) {
    text += fmt::format("point\t{}\t{}", p.t_ns, p.step);
    for (const auto& [key, value] : p.values) text += fmt::format("\t{}={}", Escape(key), value);
    text += '\n';
  }
  return Append(text);
}

Status JobFeed::AppendSummary(const std::string& nonce, const std::map<std::string, double>& figures,
                              const std::vector<Finding>& findings) {
  // One write: a reader sees the whole answer once it sees its end line.
  std::string text;
  const std::string head = "summary\t" + Escape(nonce) + "\t";
  for (const auto& [name, value] : figures) text += head + fmt::format("figure\t{}\t{}\n", Escape(name), value);
  for (const auto& f : findings)
    text += head + fmt::format("verdict\t{}\t{}\t{}\n", Escape(f.verdict), SeverityName(f.severity), Escape(f.title));
  text += head + "end\n";
  return Append(text);
}

}  // namespace gputriage
