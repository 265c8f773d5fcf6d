// The self-contained HTML report: one file holding the report document (the
// same JSON as --json), the chart document (chart_data.cc), uPlot and the
// report's own script. A Content-Security-Policy forbids every request, so a
// report opened from a mail attachment or a shared drive fetches nothing.
#include <string>

#include "gputriage/report.h"
#include "src/report/chart_data.h"
#include "src/report/html_assets.h"
#include "src/report/serve_page.h"

namespace gputriage {
namespace {

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// JSON inside <script>: '<' appears only inside strings, where \u003c means the
/// same, so no "</script>" or "<!--" in a file name can end the block.
std::string ScriptSafeJson(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size() + json_text.size() / 64);
  for (char c : json_text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

/// The page up to its body: the styles, and a Content-Security-Policy that
/// allows `connect` requests only where the page says (none for a file).
std::string PageHead(const std::string& title, const std::string& connect) {
  std::string html = "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
          "style-src 'unsafe-inline'; img-src data:" + connect + "\">\n";
  html += "<meta name=\"generator\" content=\"gputriage\">\n";
  html += "<title>gputriage: " + EscapeHtml(title) + "</title>\n";
  html += "<style>\n";
  html += assets::kUplotCss;
  html += "\n</style>\n<style>\n";
  html += assets::kReportCss;
  html += "\n</style>\n</head>\n<body>\n";
  html += "<noscript><p>These pages draw their verdicts and charts with JavaScript. The same figures are in "
          "<code>gputriage diagnose --json</code>.</p></noscript>\n";
  return html;
}

/// uPlot with its licence, then the report's own script.
std::string PageScripts() {
  std::string html = "<!-- uPlot (https://github.com/leeoniya/uPlot), bundled at build time under its licence:\n";
  html += EscapeHtml(assets::kUplotLicense);
  html += "-->\n<script>\n";
  html += assets::kUplotJs;
  html += "\n</script>\n<script>\n";
  html += assets::kReportJs;
  html += "\n</script>\n";
  return html;
}

}  // namespace

std::string RenderHtml(const Run& run, const Diagnosis& diagnosis, const HtmlOptions& options) {
  std::string title = options.title;
  if (title.empty()) {
    for (const auto& r : run.recordings) {
      if (!title.empty()) title += ", ";
      if (title.size() > 120) {
        title += "...";
        break;
      }
      const auto slash = r.source_path.find_last_of('/');
      title += slash == std::string::npos ? r.source_path : r.source_path.substr(slash + 1);
    }
  }
  JsonOptions json_options;
  json_options.indent = -1;
  const std::string report = ScriptSafeJson(RenderJson(run, diagnosis, json_options));
  const std::string charts = ScriptSafeJson(RenderChartJson(run, diagnosis));
  std::string html = PageHead(title, "");
  html.reserve(html.size() + report.size() + charts.size() + assets::kUplotJs.size() + assets::kReportJs.size() + 8192);
  html += "<main id=\"gputriage-app\" data-title=\"" + EscapeHtml(title) + "\"></main>\n";
  html += "<script type=\"application/json\" id=\"gputriage-report\">" + report + "</script>\n";
  html += "<script type=\"application/json\" id=\"gputriage-charts\">" + charts + "</script>\n";
  html += PageScripts();
  html += "<script>GputriageReport.renderEmbedded();</script>\n</body>\n</html>\n";
  return html;
}

std::string RenderServePage() {
  std::string html = PageHead("runs", "; connect-src 'self'");
  html += "<main id=\"gputriage-app\"></main>\n";
  html += PageScripts();
  html += "<script>\n";
  html += assets::kServeJs;
  html += "\n</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace gputriage
