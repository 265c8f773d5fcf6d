// The scripts and styles the HTML pages carry inside them, embedded at build
// time (cmake/embed_assets.cmake): uPlot from npm with its licence, and the
// report's own script and styles (src/report/html/).
#pragma once

#include <string_view>

namespace gputriage::assets {
extern const std::string_view kUplotJs;       // node_modules/uplot/dist/uPlot.iife.min.js
extern const std::string_view kUplotCss;      // node_modules/uplot/dist/uPlot.min.css
extern const std::string_view kUplotLicense;  // node_modules/uplot/LICENSE
extern const std::string_view kReportJs;      // src/report/html/report.js
extern const std::string_view kReportCss;     // src/report/html/report.css
extern const std::string_view kServeJs;       // src/report/html/serve.js
}  // namespace gputriage::assets
