#include "src/trackers/tensorboard_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "src/trackers/tensorboard_event.pb.h"

namespace gputriage {
namespace {

std::array<uint32_t, 256> Crc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
    table[i] = c;
  }
  return table;
}

std::string Serialized(const tensorboard::Event& event) {
  std::string out;
  event.SerializeToString(&out);
  return out;
}

double Seconds(TimeNs t) { return static_cast<double>(t) / 1e9; }

/// A text summary (TensorBoard's text plugin: a rank-0 DT_STRING tensor), shown as markdown.
std::string TextEvent(double wall_time, int64_t step, const std::string& tag, const std::string& markdown) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  auto* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  value->mutable_metadata()->set_data_class(tensorboard::DATA_CLASS_TENSOR);
  auto* tensor = value->mutable_tensor();
  tensor->set_dtype(tensorboard::DT_STRING);
  tensor->mutable_tensor_shape();  // a scalar
  tensor->add_string_val(markdown);
  return Serialized(event);
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  static const std::array<uint32_t, 256> table = Crc32cTable();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t MaskedCrc32c(std::string_view data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string TfRecord(std::string_view data) {
  // Little-endian on every platform TensorBoard runs on; written byte by byte all the same.
  std::string out;
  const uint64_t length = data.size();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<size_t>(i)] = static_cast<char>((length >> (8 * i)) & 0xFF);
  const auto put32 = [&out](uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  out += len;
  put32(MaskedCrc32c(len));
  out.append(data.data(), data.size());
  put32(MaskedCrc32c(data));
  return out;
}

std::string FileVersionEvent(double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_file_version("brain.Event:2");
  return Serialized(event);
}

std::string ScalarEvent(double wall_time, int64_t step, const std::string& tag, float value) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);  // the scalar form TensorBoard and torch's SummaryWriter use
  return Serialized(event);
}

StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Open(const std::string& dir, TimeNs started_ns) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir + ": cannot create the TensorBoard log directory: " + ec.message());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  std::unique_ptr<TensorBoardWriter> w(new TensorBoardWriter());
  w->path_ = fmt::format("{}/events.out.tfevents.{:010d}.{}.{}.gputriage", dir, started_ns / 1'000'000'000, host,
                         static_cast<int>(getpid()));
  w->fd_ = open(w->path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return IoError(w->path_ + ": cannot create the TensorBoard event file: " + std::strerror(errno));
  struct stat st {};
  if (fstat(w->fd_, &st) == 0) w->whole_size_ = st.st_size;
  RETURN_IF_ERROR(w->Append(FileVersionEvent(Seconds(started_ns))));
  return w;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) close(fd_);
}

std::string TensorBoardWriter::Describe() const { return "TensorBoard " + path_; }

Status TensorBoardWriter::Append(const std::string& event) {
  if (torn_) return IoError(path_ + ": not written to since a record was cut short (see the earlier error)");
  const std::string record = TfRecord(event);
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n == 0 ? "nothing written" : std::strerror(errno);
      // Part of a record would end the file for TensorBoard's reader (a bad
      // length or checksum, and every later record lost with it): the part is
      // cut off, so the file stays whole records and a later write can succeed
      // once there is room (a full disk that frees up).
      if (done > 0 && ftruncate(fd_, whole_size_) != 0) {
        torn_ = true;
        return IoError(path_ + ": cannot write (" + why + "), and the part written could not be removed (" +
                       std::strerror(errno) + "): the file ends in a torn record; no more is written to it");
      }
      return IoError(path_ + ": cannot write: " + why + " (the file keeps its whole records)");
    }
    done += static_cast<size_t>(n);
  }
  whole_size_ += static_cast<off_t>(record.size());
  return Status::Ok();
}

Status TensorBoardWriter::Log(const std::vector<TrackerPoint>& points) {
  for (const auto& p : points) {
    // One event per point: every scalar of a window shares its step and time.
    tensorboard::Event event;
    event.set_wall_time(Seconds(p.t_ns));
    event.set_step(p.step);
    for (const auto& [key, value] : p.values) {
      auto* v = event.mutable_summary()->add_value();
      v->set_tag(key);
      v->set_simple_value(static_cast<float>(value));
    }
    RETURN_IF_ERROR(Append(Serialized(event)));
    last_step_ = p.step;
  }
  return Status::Ok();
}

Status TensorBoardWriter::Finish(const TrackerSummary& summary) {
  const double t = Seconds(summary.ended_ns);
  tensorboard::Event figures;
  figures.set_wall_time(t);
  figures.set_step(last_step_);
  for (const auto& [key, value] : summary.figures) {
    auto* v = figures.mutable_summary()->add_value();
    v->set_tag("gputriage/summary/" + key);
    v->set_simple_value(static_cast<float>(value));
  }
  if (figures.summary().value_size() > 0) RETURN_IF_ERROR(Append(Serialized(figures)));
  std::string verdicts;
  for (const auto& f : summary.findings)
    verdicts += fmt::format("* **{}** ({}): {}\n", f.verdict, SeverityName(f.severity), f.title);
  if (verdicts.empty()) verdicts = "no verdict: no rule crossed its threshold";
  RETURN_IF_ERROR(Append(TextEvent(t, last_step_, "gputriage/verdicts", verdicts)));
  // The report as TensorBoard shows text: markdown, so the terminal report goes in a code block.
  RETURN_IF_ERROR(Append(TextEvent(t, last_step_, "gputriage/report", "```\n" + summary.report_text + "\n```")));
  if (fsync(fd_) != 0 && errno != EINVAL) return IoError(path_ + ": cannot sync: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace gputriage
