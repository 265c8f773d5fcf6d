// `gputriage runs --name NAME`: an experiment's history, one line per run with
// its headline figures, its verdicts (regressions marked) and what changed
// from the run before; as text and as JSON (schema "gputriage.experiment").
#pragma once

#include <string>
#include <vector>

#include "src/store/run_history.h"

namespace gputriage {

std::string RenderExperimentText(const std::string& name, const std::vector<ExperimentRun>& runs);
std::string RenderExperimentJson(const std::string& name, const std::vector<ExperimentRun>& runs);

}  // namespace gputriage
