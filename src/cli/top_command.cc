// `gputriage top`: a live terminal view of this machine's GPUs (NVML, or a local
// dcgm-exporter): utilization and SM/tensor/DRAM activity as sparklines,
// memory, power, the processes and their jobs, and each job's current verdict,
// drawn by the agent's own sampler and rules (src/agent/), without its server.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "src/agent/agent.h"
#include "src/cli/cli_common.h"
#include "src/top/top_screen.h"
#include "src/top/top_terminal.h"

namespace gputriage::cli {
namespace {

/// A live view: a minute's window, judged every 5 s (a node agent's are 5 minutes and 15 s).
SamplingArgs TopSampling() {
  SamplingArgs s;
  s.window_s = 60;
  s.judge_every_s = 5;
  return s;
}

struct TopArgs {
  SamplingArgs sampling = TopSampling();
  bool once = false;
};

std::atomic<bool> g_stop{false};

int RunTop(const TopArgs& args) {
  AgentOptions options = ToAgentOptions(args.sampling);
  options.view_history = 240;
  options.render_page = false;
  signal(SIGINT, [](int) { g_stop.store(true); });
  signal(SIGTERM, [](int) { g_stop.store(true); });
  Agent agent(options);
  agent.Start();
  if (args.once) {
    // One plain screen once every GPU's verdict covers the window (at most its
    // first 5 s: enough samples for a rhythm), or NVML has said why it cannot sample.
    const TimeNs enough = std::min<TimeNs>(options.window_ns, 5 * kNsPerS);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(enough + options.judge_every_ns) +
                          std::chrono::nanoseconds(3 * options.interval_ns) + std::chrono::seconds(2);
    std::shared_ptr<const AgentView> view;
    while (std::chrono::steady_clock::now() < deadline && !g_stop.load()) {
      view = agent.View();
      if (view && !view->gpus.empty() &&
          std::all_of(view->gpus.begin(), view->gpus.end(), [&](const GpuView& g) {
            // Covered up to one sampling interval short of `enough`: samples are time-stamped, not exact.
            return g.lost || (!g.judgement.verdict.empty() && g.judgement.window_covered_ns + options.interval_ns >= enough);
          }))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    view = agent.View();
    agent.Stop();
    // The screen without the blank rows that fill a terminal to its foot.
    auto lines = RenderTopScreen(view.get(), TopUiState{}, 160, 1000, "");
    while (lines.size() > 1 && lines[lines.size() - 2].text.find_first_not_of(' ') == std::string::npos)
      lines.erase(lines.end() - 2);
    for (const auto& line : lines) {
      const size_t end = line.text.find_last_not_of(' ');
      std::printf("%s\n", end == std::string::npos ? "" : line.text.substr(0, end + 1).c_str());
    }
    return view && view->gpus.empty() && !view->source_status.empty() ? kExitInput : kExitOk;
  }
  const Status s = RunTopTerminal(agent, TopTerminalOptions{}, g_stop);
  agent.Stop();
  if (!s.ok()) {
    PrintError(s);
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

Subcommand AddTopCommand(CLI::App& app) {
  auto a = std::make_shared<TopArgs>();
  auto* top = app.add_subcommand(
      "top", "Live terminal view of this machine's GPUs: activity sparklines, memory, power, processes and jobs, and "
             "each job's current verdict (keys: s sort, j/k pick, h help, q quit)");
  AddSamplingOptions(*top, a->sampling);
  top->add_flag("--once", a->once, "print one plain-text screen once the verdicts are in, and exit (no terminal needed)");
  return {top, [a] { return RunTop(*a); }};
}

}  // namespace gputriage::cli
