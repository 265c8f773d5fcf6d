#include "src/sources/kineto/kineto_json.h"

#include <simdjson.h>

#include <cmath>
#include <functional>
#include <string>

#include <fmt/format.h>

#include "src/util/decimal.h"
#include "src/util/strings.h"

namespace gputriage::kineto {
namespace {

using simdjson::ondemand::json_type;
using simdjson::ondemand::value;

std::string ErrorText(simdjson::error_code code) { return simdjson::error_message(code); }

}  // namespace

ArgTarget ArgTargetOf(std::string_view key, RawEvent& e) {
  using Kind = ArgTarget::Kind;
  auto integer = [](std::optional<int64_t>& field) { return ArgTarget{.kind = Kind::kInt, .int_value = &field}; };
  auto real = [](std::optional<double>& field) { return ArgTarget{.kind = Kind::kDouble, .double_value = &field}; };
  auto text = [](Kind kind, std::string_view& field) { return ArgTarget{.kind = kind, .text = &field}; };
  auto dim3 = [](bool& has, uint32_t* dim) { return ArgTarget{.kind = Kind::kDim3, .has_dim3 = &has, .dim3 = dim}; };
  // By first letter: a dozen keys per event, most of them not used.
  switch (key.empty() ? 0 : key[0]) {
    case 'E':
    case 'e':
      if (KeyIs(key, "External id") || KeyIs(key, "external id")) return integer(e.external_id);
      if (KeyIs(key, "est. achieved occupancy %")) return real(e.occupancy_percent);
      break;
    case 'c':
      if (KeyIs(key, "correlation")) return integer(e.correlation);
      break;
    case 's':
      if (KeyIs(key, "stream")) return integer(e.stream);
      if (KeyIs(key, "shared memory")) return integer(e.shared_memory);
      break;
    case 'd':
      if (KeyIs(key, "device")) return integer(e.device);
      break;
    case 'r':
      if (KeyIs(key, "registers per thread")) return integer(e.registers_per_thread);
      break;
    case 'b':
      if (KeyIs(key, "blocks per SM")) return real(e.blocks_per_sm);
      if (KeyIs(key, "bytes")) return integer(e.bytes);
      if (KeyIs(key, "block")) return dim3(e.has_block, e.block);
      break;
    case 'w':
      if (KeyIs(key, "warps per SM")) return real(e.warps_per_sm);
      break;
    case 'g':
      if (KeyIs(key, "grid")) return dim3(e.has_grid, e.grid);
      break;
    case 'C':
      if (KeyIs(key, "Collective name")) return text(Kind::kString, e.collective);
      break;
    case 'I':
      if (KeyIs(key, "Input type")) return text(Kind::kFirstNonEmptyString, e.first_input_type);
      if (KeyIs(key, "Input Dims")) return text(Kind::kRawArray, e.input_dims);
      break;
    case 'B':
      if (KeyIs(key, "Bytes")) return integer(e.bytes);  // a [memory] event's (negative: a free)
      break;
    case 'T':
      if (KeyIs(key, "Total Allocated")) return integer(e.total_allocated);
      if (KeyIs(key, "Total Reserved")) return integer(e.total_reserved);
      break;
    case 'D':
      if (KeyIs(key, "Device Type")) return integer(e.device_type);
      if (KeyIs(key, "Device Id")) return integer(e.device_id);
      break;
    case 'f':
      if (KeyIs(key, "flops")) return real(e.flops);
      break;
    case 'l':
      if (KeyIs(key, "labels")) return text(Kind::kString, e.label);
      break;
    case 'n':
      if (KeyIs(key, "name")) return text(Kind::kString, e.label);  // metadata events' args
      break;
    default: break;
  }
  return {};
}

std::optional<double> DoubleFromText(std::string_view text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const std::string copy(text);
  const double d = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str()) return std::nullopt;
  return d;
}

namespace {

/// An integer field: JSON integer, an integral float, or a numeric string.
std::optional<int64_t> AsInt(value v) {
  json_type type;
  if (v.type().get(type)) return std::nullopt;
  if (type == json_type::number) {
    int64_t exact;  // the common case, an integer: simdjson's own reading is the same number
    if (!v.get_int64().get(exact)) return exact;
    if (auto parsed = ParseInt64(TrimAsciiSpace(v.raw_json_token()))) return parsed;
    double d;
    if (v.get_double().get(d) || !std::isfinite(d) || std::fabs(d) > 9.2e18) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  if (type == json_type::string) {
    std::string_view text;
    if (v.get_string().get(text)) return std::nullopt;
    return ParseTrailingInt(text);
  }
  return std::nullopt;
}

std::optional<double> AsDouble(value v) {
  json_type type;
  if (v.type().get(type)) return std::nullopt;
  if (type == json_type::number) {
    double d;
    if (v.get_double().get(d)) return std::nullopt;
    return d;
  }
  if (type == json_type::string) {
    std::string_view text;
    if (v.get_string().get(text)) return std::nullopt;
    return DoubleFromText(text);
  }
  return std::nullopt;
}

/// Microsecond time field → ns; sets *malformed when present but unreadable.
std::optional<int64_t> AsTimeNs(value v, bool* malformed) {
  json_type type;
  if (v.type().get(type)) {
    *malformed = true;
    return std::nullopt;
  }
  std::optional<int64_t> ns;
  if (type == json_type::number) {
    ns = ParseMicrosecondsToNs(v.raw_json_token());
  } else if (type == json_type::string) {
    std::string_view text;
    if (!v.get_string().get(text)) ns = ParseMicrosecondsToNs(text);
  }
  if (!ns) *malformed = true;
  return ns;
}

bool ReadDim3(value v, uint32_t out[3]) {
  simdjson::ondemand::array array;
  if (v.get_array().get(array)) return false;
  int i = 0;
  for (auto element : array) {
    int64_t x;
    if (element.get_int64().get(x)) return false;
    if (i < 3) out[i] = x < 0 ? 0 : static_cast<uint32_t>(std::min<int64_t>(x, UINT32_MAX));
    ++i;
  }
  return true;
}

std::string_view FirstNonEmptyString(value v) {
  simdjson::ondemand::array array;
  if (v.get_array().get(array)) return {};
  for (auto element : array) {
    std::string_view s;
    if (!element.get_string().get(s) && !s.empty()) return s;
  }
  return {};
}

Status ParseArgs(value v, RawEvent* e) {
  simdjson::ondemand::object args;
  if (auto err = v.get_object().get(args)) return DataLossError("args: " + ErrorText(err));
  for (auto field : args) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) return DataLossError("args key: " + ErrorText(err));
    value fv;
    if (field.value().get(fv)) return DataLossError(fmt::format("args.\"{}\": unreadable value", key));
    const ArgTarget target = ArgTargetOf(key, *e);
    switch (target.kind) {
      case ArgTarget::Kind::kInt: *target.int_value = AsInt(fv); break;
      case ArgTarget::Kind::kDouble: *target.double_value = AsDouble(fv); break;
      case ArgTarget::Kind::kDim3: *target.has_dim3 = ReadDim3(fv, target.dim3); break;
      case ArgTarget::Kind::kString: {
        std::string_view s;
        if (!fv.get_string().get(s)) *target.text = s;
        break;
      }
      case ArgTarget::Kind::kFirstNonEmptyString: *target.text = FirstNonEmptyString(fv); break;
      case ArgTarget::Kind::kRawArray: {
        // Kept as text: only matrix operators' shapes are read (kineto_reader).
        simdjson::ondemand::array dims;
        if (!fv.get_array().get(dims) && dims.raw_json().get(*target.text)) *target.text = {};
        break;
      }
      case ArgTarget::Kind::kUnused: break;
    }
  }
  return Status::Ok();
}

}  // namespace

struct EventParser::Impl {
  simdjson::ondemand::parser parser;
};

EventParser::EventParser() : impl_(std::make_unique<Impl>()) {}
EventParser::~EventParser() = default;

namespace {

/// The fields of one event object; shared by the one-event and the run parsers so
/// that both read every event alike.
Status ParseEventObject(simdjson::ondemand::object obj, RawEvent* e) {
  for (auto field : obj) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) return DataLossError("malformed key: " + ErrorText(err));
    value v;
    if (field.value().get(v)) return DataLossError(fmt::format("field \"{}\": unreadable value", key));
    if (key == "ph") {
      std::string_view ph;
      if (!v.get_string().get(ph) && ph.size() == 1) e->ph = ph[0];
      else return DataLossError("field \"ph\": not a one-letter string");
    } else if (key == "cat") {
      if (v.get_string().get(e->cat)) return DataLossError("field \"cat\": not a string");
    } else if (key == "name") {
      json_type t;
      if (!v.type().get(t) && t == json_type::string) {
        if (v.get_string().get(e->name)) return DataLossError("field \"name\": bad string");
      }
    } else if (key == "ts") {
      e->ts_ns = AsTimeNs(v, &e->ts_malformed);
    } else if (key == "dur") {
      e->dur_ns = AsTimeNs(v, &e->dur_malformed);
    } else if (key == "pid") {
      e->pid = AsInt(v);
      std::string_view text;
      json_type t;
      // Only a pid without a number can be the autograd profiler's "CPU functions".
      if (!e->pid && !v.type().get(t) && t == json_type::string && !v.get_string().get(text))
        e->pid_cpu_functions = text == "CPU functions";
    } else if (key == "tid") {
      e->tid = AsInt(v);
    } else if (key == "args") {
      json_type t;
      if (!v.type().get(t) && t == json_type::object) RETURN_IF_ERROR(ParseArgs(v, e));
    }
  }
  return Status::Ok();
}

}  // namespace

Status EventParser::Parse(std::string_view raw, RawEvent* e) {
  *e = RawEvent{};
  simdjson::ondemand::document doc;
  if (auto err = impl_->parser.iterate(raw.data(), raw.size(), raw.size() + simdjson::SIMDJSON_PADDING).get(doc))
    return DataLossError("not valid JSON: " + ErrorText(err));
  simdjson::ondemand::object obj;
  if (auto err = doc.get_object().get(obj)) return DataLossError("event is not a JSON object: " + ErrorText(err));
  return ParseEventObject(obj, e);
}

bool EventParser::ParseRun(std::string_view array_text,
                           const std::function<void(const RawEvent&, size_t position)>& on_event) {
  simdjson::ondemand::document doc;
  if (impl_->parser.iterate(array_text.data(), array_text.size(), array_text.size() + simdjson::SIMDJSON_PADDING)
          .get(doc))
    return false;
  simdjson::ondemand::array array;
  if (doc.get_array().get(array)) return false;
  RawEvent e;
  for (auto element : array) {
    simdjson::ondemand::value v;
    if (element.get(v)) return false;
    const char* at = nullptr;
    if (v.current_location().get(at)) return false;
    simdjson::ondemand::object obj;
    if (v.get_object().get(obj)) return false;
    e = RawEvent{};
    // Any problem, even one the one-event path would only count, sends the whole
    // run back to that path: its messages and counts are then exactly its own.
    if (!ParseEventObject(obj, &e).ok()) return false;
    on_event(e, static_cast<size_t>(at - array_text.data()));
  }
  // Nothing may follow the array: a run cut at a wrong place can close it early.
  const char* rest = nullptr;
  return doc.current_location().get(rest) == simdjson::OUT_OF_BOUNDS;
}

namespace {

Status ParseDevices(simdjson::ondemand::value v, std::vector<Device>* devices) {
  simdjson::ondemand::array array;
  if (v.get_array().get(array)) return DataLossError("deviceProperties: not an array");
  for (auto element : array) {
    simdjson::ondemand::object obj;
    if (element.get_object().get(obj)) return DataLossError("deviceProperties[]: not an object");
    Device d;
    for (auto field : obj) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return DataLossError("deviceProperties[]: bad key");
      simdjson::ondemand::value fv;
      if (field.value().get(fv)) return DataLossError(fmt::format("deviceProperties[].{}: bad value", key));
      auto as_int = [&]() { return AsInt(fv).value_or(0); };
      if (key == "id") d.id = static_cast<int>(AsInt(fv).value_or(-1));
      else if (key == "name") {
        std::string_view s;
        if (!fv.get_string().get(s)) d.name = std::string(s);
      } else if (key == "totalGlobalMem") d.total_memory_bytes = as_int();
      else if (key == "computeMajor") d.compute_major = static_cast<int>(AsInt(fv).value_or(-1));
      else if (key == "computeMinor") d.compute_minor = static_cast<int>(AsInt(fv).value_or(-1));
      else if (key == "numSms") d.num_sms = static_cast<int>(as_int());
      else if (key == "maxThreadsPerMultiprocessor") d.max_threads_per_sm = static_cast<int>(as_int());
      else if (key == "warpSize") d.warp_size = static_cast<int>(as_int());
      else if (key == "regsPerMultiprocessor") d.regs_per_sm = static_cast<int>(as_int());
      else if (key == "sharedMemPerMultiprocessor" || key == "maxSharedMemoryPerMultiProcessor")
        d.shared_memory_per_sm_bytes = static_cast<int>(as_int());
    }
    devices->push_back(std::move(d));
  }
  return Status::Ok();
}

Status ParseDistributedInfo(simdjson::ondemand::value v, TraceHeader* header) {
  simdjson::ondemand::object obj;
  if (v.get_object().get(obj)) return DataLossError("distributedInfo: not an object");
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return DataLossError("distributedInfo: bad key");
    simdjson::ondemand::value fv;
    if (field.value().get(fv)) return DataLossError(fmt::format("distributedInfo.{}: bad value", key));
    if (key == "rank") header->rank = static_cast<int>(AsInt(fv).value_or(-1));
    else if (key == "world_size") header->world_size = static_cast<int>(AsInt(fv).value_or(-1));
    else if (key == "backend") {
      std::string_view s;
      if (!fv.get_string().get(s)) header->backend = std::string(s);
    } else if (key == "nccl_version") {
      std::string_view s;
      if (!fv.get_string().get(s)) header->metadata["nccl_version"] = std::string(s);
    }
  }
  return Status::Ok();
}

}  // namespace

Status ApplyHeaderMember(std::string_view key, std::string_view raw_value, TraceHeader* header) {
  const simdjson::padded_string padded(raw_value);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (auto err = parser.iterate(padded).get(doc))
    return DataLossError(fmt::format("member \"{}\": {}", key, ErrorText(err)));
  json_type doc_type;
  if (auto err = doc.type().get(doc_type))
    return DataLossError(fmt::format("member \"{}\": {}", key, ErrorText(err)));
  if (doc_type != json_type::object && doc_type != json_type::array) {
    // simdjson reads a scalar document only through the document itself.
    if (key == "baseTimeNanoseconds") {
      int64_t base;
      if (doc.get_int64().get(base)) return DataLossError("member \"baseTimeNanoseconds\": not an integer");
      header->base_time_ns = base;
    } else if (doc_type == json_type::string) {
      std::string_view text;
      if (!doc.get_string().get(text)) header->metadata[std::string(key)] = std::string(text);
    } else {
      std::string_view raw = raw_value;
      header->metadata[std::string(key)] = std::string(raw);
    }
    return Status::Ok();
  }
  simdjson::ondemand::value v;
  if (auto err = doc.get_value().get(v))
    return DataLossError(fmt::format("member \"{}\": {}", key, ErrorText(err)));
  Status status;
  if (key == "deviceProperties") {
    status = ParseDevices(v, &header->devices);
  } else if (key == "distributedInfo") {
    status = ParseDistributedInfo(v, header);
  }
  return status;
}

}  // namespace gputriage::kineto
