// Who each marked process of a recorded job is in a distributed run: its rank,
// local rank and world size, and its host. Two sources, the better first:
//   - what the process told the recorder ("dist.rank" ... on the job's
//     configuration channel, once torch.distributed was initialised, or from its
//     own environment when it first marked a step: python/gputriage/job_config.py);
//   - its environment as the launcher set it, read from /proc/PID/environ while
//     it runs (torchrun's RANK/LOCAL_RANK/WORLD_SIZE, Slurm's SLURM_PROCID/
//     SLURM_LOCALID/SLURM_NTASKS, Open MPI's OMPI_COMM_WORLD_*).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/model.h"

namespace gputriage {

/// The rank a process's environment gives (`environ`: NUL-separated NAME=VALUE,
/// as /proc/PID/environ holds it); nullopt when it names none.
std::optional<ProcessRank> RankFromEnvironment(uint32_t pid, std::string_view environ);

/// Reads /proc/PID/environ (at most 256 KiB; `proc_root` is "/proc" except in
/// tests) and gives RankFromEnvironment's answer; nullopt when unreadable.
std::optional<ProcessRank> ReadProcessRank(uint32_t pid, const std::string& proc_root = "/proc");

/// The rank a process reported on the configuration channel ("dist.rank",
/// "dist.local_rank", "dist.world_size", "dist.source", "host.name").
std::optional<ProcessRank> RankFromSettings(uint32_t pid, const std::map<std::string, std::string>& settings);

/// One entry per process: the reported rank where there is one, else the
/// environment's; `host` filled in where a process left its own empty.
std::vector<ProcessRank> MergeProcessRanks(const std::map<uint32_t, ProcessRank>& reported,
                                           const std::map<uint32_t, ProcessRank>& from_environment,
                                           const std::string& host);

}  // namespace gputriage
