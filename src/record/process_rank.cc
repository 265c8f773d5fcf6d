#include "src/record/process_rank.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>

namespace gputriage {
namespace {

constexpr size_t kMaxEnvironBytes = 256 << 10;
constexpr int kMaxRank = 1 << 24;

/// A non-negative integer no larger than kMaxRank (and, for a world size, at least 1).
std::optional<int> SmallInt(std::string_view text, int at_least = 0) {
  int value = -1;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || end != text.data() + text.size() || value < at_least || value > kMaxRank)
    return std::nullopt;
  return value;
}

/// The launchers' names for rank, local rank and world size, in the order they are trusted.
struct RankNames {
  const char* rank;
  const char* local_rank;
  const char* world_size;
};
constexpr std::array<RankNames, 4> kLaunchers = {{
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},  // torchrun, torch.distributed.launch, accelerate, DeepSpeed
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},  // MPICH, Intel MPI
}};

}  // namespace

std::optional<ProcessRank> RankFromEnvironment(uint32_t pid, std::string_view environ) {
  std::map<std::string_view, std::string_view> env;
  while (!environ.empty()) {
    const size_t end = environ.find('\0');
    const std::string_view entry = environ.substr(0, end);
    environ.remove_prefix(end == std::string_view::npos ? environ.size() : end + 1);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos && eq > 0) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (const auto& names : kLaunchers) {
    const auto rank = env.find(names.rank);
    if (rank == env.end()) continue;
    const auto value = SmallInt(rank->second);
    if (!value) continue;
    ProcessRank r;
    r.pid = pid;
    r.rank = *value;
    r.source = names.rank;
    if (auto local = env.find(names.local_rank); local != env.end()) r.local_rank = SmallInt(local->second).value_or(-1);
    if (auto world = env.find(names.world_size); world != env.end()) r.world_size = SmallInt(world->second, 1).value_or(-1);
    if (r.world_size > 0 && r.rank >= r.world_size) r.world_size = -1;  // inconsistent: the size is not trusted
    return r;
  }
  return std::nullopt;
}

std::optional<ProcessRank> ReadProcessRank(uint32_t pid, const std::string& proc_root) {
  const std::string path = proc_root + "/" + std::to_string(pid) + "/environ";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[16384];
  while (text.size() < kMaxEnvironBytes) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return RankFromEnvironment(pid, text);
}

std::optional<ProcessRank> RankFromSettings(uint32_t pid, const std::map<std::string, std::string>& settings) {
  const auto rank = settings.find("dist.rank");
  if (rank == settings.end()) return std::nullopt;
  const auto value = SmallInt(rank->second);
  if (!value) return std::nullopt;
  ProcessRank r;
  r.pid = pid;
  r.rank = *value;
  if (auto it = settings.find("dist.local_rank"); it != settings.end()) r.local_rank = SmallInt(it->second).value_or(-1);
  if (auto it = settings.find("dist.world_size"); it != settings.end()) r.world_size = SmallInt(it->second, 1).value_or(-1);
  if (r.world_size > 0 && r.rank >= r.world_size) r.world_size = -1;
  if (auto it = settings.find("host.name"); it != settings.end() && it->second.size() <= 255) r.host = it->second;
  const auto source = settings.find("dist.source");
  r.source = source != settings.end() && source->second.size() <= 64 ? source->second : "reported";
  return r;
}

std::vector<ProcessRank> MergeProcessRanks(const std::map<uint32_t, ProcessRank>& reported,
                                           const std::map<uint32_t, ProcessRank>& from_environment,
                                           const std::string& host) {
  std::map<uint32_t, ProcessRank> merged = from_environment;
  for (const auto& [pid, r] : reported) merged[pid] = r;  // the process's own word stands
  std::vector<ProcessRank> out;
  for (auto& [pid, r] : merged) {
    if (r.host.empty()) r.host = host;
    out.push_back(r);
  }
  return out;
}

}  // namespace gputriage
