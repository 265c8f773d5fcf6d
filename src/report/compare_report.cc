// `gputriage compare` output: a table of the two runs, what changed, and the
// explanations; the JSON form beside the report's own schema.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gputriage/report.h"
#include "src/util/strings.h"
#include "src/verdicts/compare.h"

namespace gputriage {

std::string RenderComparisonJson(const Comparison& c) {
  using nlohmann::json;
  const auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
  json j;
  j["schema"] = "gputriage.comparison";
  j["schema_version"] = 1;
  j["a"] = c.a_name;
  j["b"] = c.b_name;
  j["metrics"] = json::array();
  j["regressions"] = json::array();
  for (const auto& m : c.metrics) {
    json row = {{"metric", m.metric}, {"unit", m.unit}, {"before", num(m.before)}, {"after", num(m.after)},
                {"change_percent", num(m.change_percent)}, {"higher_is_better", m.higher_is_better},
                {"worse", m.worse}, {"better", m.better}, {"noise_floor", m.noise_floor}};
    j["metrics"].push_back(row);
    if (m.worse) j["regressions"].push_back(row);
  }
  j["not_comparable"] = c.not_comparable.empty() ? json(nullptr) : json(c.not_comparable);
  j["parts_basis"] = c.parts_basis;
  j["parts"] = json::array();  // largest move first; a kernel in one run's top table only: delta_ms null
  for (const auto& p : c.parts)
    j["parts"].push_back({{"kind", p.kind}, {"name", p.name}, {"before_ms", num(p.before_ms)}, {"after_ms", num(p.after_ms)},
                          {"delta_ms", p.unknown_move ? json(nullptr) : json(p.delta_ms())}});
  j["config_changes"] = json::array();
  for (const auto& ch : c.config_changes)
    j["config_changes"].push_back({{"key", ch.key}, {"before", ch.before.empty() ? json(nullptr) : json(ch.before)},
                                   {"after", ch.after.empty() ? json(nullptr) : json(ch.after)}});
  j["settings_recorded"] = c.settings_recorded;  // false: config_changes empty means unknown, not unchanged
  j["verdicts"] = {{"a", c.a_verdicts}, {"b", c.b_verdicts}};
  j["explanations"] = json::array();
  for (const auto& e : c.explanations)
    j["explanations"].push_back({{"metric", e.metric},
                                 {"config_key", e.config_key.empty() ? json(nullptr) : json(e.config_key)},
                                 {"text", e.text}});
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

/// What moved underneath the headline: the largest moves in ms per step, and
/// how many smaller ones are left out.
void RenderParts(const Comparison& c, std::string& out) {
  if (c.parts.empty()) return;
  constexpr size_t kShown = 12;
  out += "\nWHAT MOVED UNDERNEATH (" + c.parts_basis + ")\n";
  const auto ms = [](double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.3f}", v); };
  size_t shown = 0;
  for (const auto& p : c.parts) {
    if (shown == kShown || std::fabs(p.delta_ms()) < 0.0005) break;  // kernels of unknown move rank last
    const std::string name = p.name.size() > 60 ? p.name.substr(0, 57) + "..." : p.name;
    out += fmt::format("  {:<12} {:<60} {:>10} {:>10} {:>+10.3f}\n", p.kind, Printable(name), ms(p.before_ms),
                       ms(p.after_ms), p.delta_ms());
    ++shown;
  }
  if (shown == 0) out += "  nothing moved by 0.001 ms per step or more\n";
  else if (c.parts.size() > shown) out += fmt::format("  ({} smaller moves in the JSON: compare --json)\n", c.parts.size() - shown);
}

}  // namespace

std::string RenderComparisonText(const Comparison& c) {
  std::string out = fmt::format("gputriage compare — A: {}  B: {}\n\n", Printable(c.a_name), Printable(c.b_name));
  out += fmt::format("  {:<36} {:>18} {:>18} {:>10}\n", "", "A", "B", "change");
  for (const auto& m : c.metrics) {
    // Shares move in points: 8.6% → 42.0% is +33.4 points, not +387%.
    const std::string change = m.unit == "percent" ? fmt::format("{:+.1f} pts", m.after - m.before)
                                                   : fmt::format("{:+.1f}%", m.change_percent);
    out += fmt::format("  {:<36} {:>18} {:>18} {:>10}{}\n", m.label, FormatComparedValue(m, m.before),
                       FormatComparedValue(m, m.after), change,
                       m.worse                                    ? "  worse"
                       : m.better                                 ? "  better"
                       : StartsWith(m.noise_floor, "not judged") ? "  (" + m.noise_floor + ")"
                                                                  : "");
  }
  out += fmt::format("\n  verdicts A: {}\n  verdicts B: {}\n", c.a_verdicts.empty() ? "none" : Join(c.a_verdicts, ", "),
                     c.b_verdicts.empty() ? "none" : Join(c.b_verdicts, ", "));
  if (!c.not_comparable.empty()) out += "\n  NOT COMPARABLE (compared as asked): " + Printable(c.not_comparable) + "\n";
  RenderParts(c, out);
  out += "\nWHAT CHANGED\n";
  if (c.config_changes.empty())
    out += c.settings_recorded
               ? "  nothing that is recorded (settings, tags, commit, command and GPU are the same)\n"
               : "  unknown: an input keeps no settings (a profiler trace or metric log records none; "
                 "`gputriage record --tag KEY=VALUE` keeps them)\n";
  for (const auto& ch : c.config_changes)
    out += fmt::format("  {:<28} {} → {}\n", Printable(ch.key), Printable(ch.before.empty() ? "(unset)" : ch.before),
                       Printable(ch.after.empty() ? "(unset)" : ch.after));
  out += "\nWHY\n";
  if (c.explanations.empty()) out += "  no figure moved beyond its noise floor\n";
  for (const auto& e : c.explanations) out += "  " + Printable(e.text) + "\n";
  return out;
}

}  // namespace gputriage
