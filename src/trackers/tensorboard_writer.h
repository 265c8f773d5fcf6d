// `record --tensorboard DIR`: the run's figures as TensorBoard event files
// (events.out.tfevents.<secs>.<host>.<pid>.gputriage), beside the job's own:
// scalars per window under the tracker keys, the verdicts and summary figures at
// the end, and the report as text. Records are protobuf messages (Debian's
// libprotobuf, tensorboard_event.proto) in TFRecord framing; protobuf is used
// only in tensorboard_writer.cc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "src/trackers/tracker.h"

namespace gputriage {

/// CRC-32C (Castagnoli) of `data`, and TFRecord's masked form of it.
uint32_t Crc32c(std::string_view data);
uint32_t MaskedCrc32c(std::string_view data);
/// One TFRecord: length, masked CRC of the length, data, masked CRC of the data.
std::string TfRecord(std::string_view data);
/// Serialized Event protos, for tests: the file-version event and a scalar event.
std::string FileVersionEvent(double wall_time);
std::string ScalarEvent(double wall_time, int64_t step, const std::string& tag, float value);

class TensorBoardWriter : public Tracker {
 public:
  /// Creates DIR (and its parents) and the event file, and writes its first
  /// record. Errors name the path.
  static StatusOr<std::unique_ptr<TensorBoardWriter>> Open(const std::string& dir, TimeNs started_ns);
  ~TensorBoardWriter() override;

  std::string Describe() const override;
  Status Log(const std::vector<TrackerPoint>& points) override;
  Status Finish(const TrackerSummary& summary) override;
  const std::string& path() const { return path_; }

 private:
  TensorBoardWriter() = default;
  Status Append(const std::string& event);
  int fd_ = -1;
  std::string path_;
  int64_t last_step_ = 0;
  off_t whole_size_ = 0;  // the file's size after its last whole record
  bool torn_ = false;     // a torn record could not be cut off: nothing more is written
};

}  // namespace gputriage
