// The page `serve` answers every browser address with: the report's styles and
// scripts (the same as the offline file's) and serve.js, which reads the
// address, asks the JSON API and draws the runs table, a run's report, a
// comparison or an experiment's trend.
#pragma once

#include <string>

namespace gputriage {

std::string RenderServePage();

}  // namespace gputriage
