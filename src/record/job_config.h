// What the job tells the recorder about itself: its DataLoader, optimizer,
// precision, compile and attention choices, library versions, and the user's
// own gputriage.config(...). The Python package appends lines
// "PID\tKEY\tVALUE\n" (tab, newline and backslash escaped in VALUE) to a memfd
// the recorder creates and the job inherits, named by $GPUTRIAGE_CONFIG_FD (and
// $GPUTRIAGE_CONFIG_PATH, /proc/RECORDER/fd/N, for processes that closed it).
// The recorder trusts none of it: keys are checked, sizes bounded, and a later
// line for a key replaces an earlier one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/status.h"

namespace gputriage {

inline constexpr const char* kConfigFdEnv = "GPUTRIAGE_CONFIG_FD";
inline constexpr const char* kConfigPathEnv = "GPUTRIAGE_CONFIG_PATH";

/// What the channel held, as far as it could be trusted.
struct JobConfig {
  std::map<std::string, std::string> settings;  // KEY → VALUE, the last line for each key
  int64_t rejected_lines = 0;                   // malformed, a reserved or bad key, too long, past the key limit
  std::string first_problem;                    // the first rejected line's problem, for the report
  bool truncated = false;                       // the job wrote more than kMaxBytes
  std::vector<std::string> requests;            // "gputriage.request" lines: what the job asks of the recorder
  /// Keys that belong to one process (IsProcessKey: "dist.rank", "host.name", ...), by process id.
  static constexpr size_t kMaxProcesses = 65536;
  std::map<uint32_t, std::map<std::string, std::string>> by_process;
};

/// Keys each process reports for itself: its rank, local rank, world size and
/// backend in a distributed run ("dist.*"), and its host ("host.name").
inline bool IsProcessKey(std::string_view key) { return key.substr(0, 5) == "dist." || key == "host.name"; }

/// The key of a request line ("summary NONCE": the job, ending, asks for the
/// diagnosis so far; the answer goes to its feed, src/trackers/job_feed.h). Keys
/// under "gputriage." are the recorder's protocol, never settings.
inline constexpr const char* kJobRequestKey = "gputriage.request";

/// Parses the channel's text. A last line without its newline is a write in
/// progress (or cut short) and is left out.
JobConfig ParseJobConfig(std::string_view text);

class JobConfigChannel {
 public:
  static constexpr size_t kMaxBytes = 4 << 20;   // read at most this much
  static constexpr size_t kMaxKeys = 1000;
  static constexpr size_t kMaxKeyBytes = 128;
  static constexpr size_t kMaxValueBytes = 4096;

  static StatusOr<std::unique_ptr<JobConfigChannel>> Create();
  ~JobConfigChannel();
  JobConfigChannel(const JobConfigChannel&) = delete;
  JobConfigChannel& operator=(const JobConfigChannel&) = delete;

  /// The descriptor the job inherits (its number goes in $GPUTRIAGE_CONFIG_FD).
  int fd() const { return fd_; }
  /// Everything written so far.
  JobConfig Read() const;
  /// Requests written since the last call (complete lines only).
  std::vector<std::string> TakeRequests();

 private:
  JobConfigChannel() = default;
  int fd_ = -1;
  size_t requests_read_to_ = 0;  // offset of the first line TakeRequests has not seen
};

}  // namespace gputriage
