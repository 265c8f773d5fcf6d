// The Prometheus exposition formats the agent serves: text 0.0.4 (what every
// Prometheus scrapes by default) and OpenMetrics 1.0 (when the scraper's Accept
// header asks for it). Families are written in the order they are begun, each
// with its HELP and TYPE once; label values are escaped as both formats say.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputriage {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Exposition {
 public:
  enum class Format { kPrometheusText, kOpenMetrics };
  enum class Type { kGauge, kCounter, kInfo };

  /// Starts a family. A counter's samples get `_total` (and OpenMetrics its
  /// unit-less family name); an info family's value is 1.
  void Family(std::string_view name, Type type, std::string_view help);
  /// A sample of the current family. NaN and infinities are written as the
  /// formats spell them.
  void Sample(const Labels& labels, double value);

  std::string Render(Format format) const;
  /// The Content-Type of each format.
  static const char* ContentType(Format format);
  /// The format an Accept header asks for (OpenMetrics only when named).
  static Format Negotiate(std::string_view accept);

  /// A valid metric or label name: [a-zA-Z_:][a-zA-Z0-9_:]* (labels without ':').
  static bool ValidName(std::string_view name, bool label = false);

 private:
  struct SampleRow {
    Labels labels;
    double value;
  };
  struct FamilyRows {
    std::string name;
    Type type;
    std::string help;
    std::vector<SampleRow> samples;
  };
  std::vector<FamilyRows> families_;
};

/// A label value as the exposition writes it: \\, \" and \n escaped.
std::string EscapeLabelValue(std::string_view value);
/// A HELP text: \\ and \n escaped.
std::string EscapeHelp(std::string_view help);
/// A sample value: the shortest text that reads back the same; NaN, +Inf, -Inf.
std::string FormatSampleValue(double value);

}  // namespace gputriage
