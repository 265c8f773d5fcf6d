#include "src/agent/exposition.h"

#include <cmath>

#include <fmt/format.h>

#include "src/util/strings.h"

namespace gputriage {

std::string EscapeLabelValue(std::string_view raw) {
  // Label values come from processes (/proc/PID/comm, pod names) and any user
  // can name a process with bytes that are not UTF-8; Prometheus then drops
  // the node's whole scrape ("invalid UTF-8 label value"). Such bytes become
  // U+FFFD, as Go's strings.ToValidUTF8 writes them.
  const std::string value = ValidUtf8(raw);
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

bool Exposition::ValidName(std::string_view name, bool label) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void Exposition::Family(std::string_view name, Type type, std::string_view help) {
  families_.push_back(FamilyRows{std::string(name), type, std::string(help), {}});
}

void Exposition::Sample(const Labels& labels, double value) {
  if (families_.empty()) return;
  families_.back().samples.push_back(SampleRow{labels, value});
}

const char* Exposition::ContentType(Format format) {
  return format == Format::kOpenMetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                        : "text/plain; version=0.0.4; charset=utf-8";
}

Exposition::Format Exposition::Negotiate(std::string_view accept) {
  return Contains(accept, "application/openmetrics-text") ? Format::kOpenMetrics : Format::kPrometheusText;
}

std::string Exposition::Render(Format format) const {
  const bool om = format == Format::kOpenMetrics;
  std::string out;
  out.reserve(families_.size() * 256);
  for (const auto& f : families_) {
    if (f.samples.empty()) continue;  // a family with nothing to say is left out
    // OpenMetrics names a counter family without `_total` and an info family
    // without `_info`; the text format has no info type (a gauge of 1).
    std::string family = f.name;
    std::string suffix;
    if (f.type == Type::kCounter) suffix = "_total";
    if (f.type == Type::kInfo) suffix = "_info";
    if (!om) family += suffix;
    const char* type = f.type == Type::kCounter ? "counter" : f.type == Type::kInfo ? (om ? "info" : "gauge") : "gauge";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", family, EscapeHelp(f.help), family, type);
    for (const auto& s : f.samples) {
      out += f.name;
      out += suffix;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i) out += ',';
          out += s.labels[i].first;
          out += "=\"";
          out += EscapeLabelValue(s.labels[i].second);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      out += FormatSampleValue(f.type == Type::kInfo ? 1.0 : s.value);
      out += '\n';
    }
  }
  if (om) out += "# EOF\n";
  return out;
}

}  // namespace gputriage
