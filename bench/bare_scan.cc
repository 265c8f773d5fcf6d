// The anchor of the trace-import benchmark (bench/trace_scale_benchmark.sh): the
// least a reader of a Kineto trace can do, on one core. It loads the file, walks
// every element of "traceEvents" with simdjson's on-demand parser and reads each
// event's "cat" and "dur", as issue 25 defines the "bare scan": no model, no
// analysis, no error tolerance. gputriage's import does all of that, so its speed
// is reported as a ratio to this one, measured in the same run on the same file.
//
//   bare_scan FILE   prints "events=N cats=C dur_sum_us=D"
#include <cstdio>
#include <string_view>
#include <string>
#include <unordered_set>

#include <simdjson.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bare_scan TRACE.json\n");
    return 2;
  }
  simdjson::padded_string json;
  if (auto error = simdjson::padded_string::load(argv[1]).get(json)) {
    std::fprintf(stderr, "%s: %s\n", argv[1], simdjson::error_message(error));
    return 1;
  }
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (auto error = parser.iterate(json).get(doc)) {
    std::fprintf(stderr, "%s: %s\n", argv[1], simdjson::error_message(error));
    return 1;
  }
  long long events = 0;
  double dur_sum = 0;
  std::unordered_set<std::string> cat_names;
  simdjson::ondemand::array trace_events;
  if (auto error = doc["traceEvents"].get_array().get(trace_events)) {
    std::fprintf(stderr, "%s: traceEvents: %s\n", argv[1], simdjson::error_message(error));
    return 1;
  }
  for (auto element : trace_events) {
    simdjson::ondemand::object event;
    if (element.get_object().get(event)) return 1;
    ++events;
    std::string_view cat;
    if (!event["cat"].get_string().get(cat) && cat_names.size() < 64) cat_names.emplace(cat);
    double dur = 0;
    if (!event["dur"].get_double().get(dur)) dur_sum += dur;
  }
  std::printf("events=%lld cats=%zu dur_sum_us=%.0f\n", events, cat_names.size(), dur_sum);
  return 0;
}
