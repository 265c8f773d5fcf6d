#include "src/util/yaml_tree.h"

#include <yaml.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace gputriage {
namespace {

// The tree is built from libyaml's events, so these bounds hold while the file
// is read, never after a whole document was loaded (libyaml's loader had built
// every node of 1 MiB of '[' before the depth was looked at).
constexpr size_t kMaxDepth = 64;
constexpr int64_t kMaxNodes = 100'000;
constexpr size_t kMaxBytes = 1 << 20;  // a configuration file, not a data set

/// The tree under construction: the containers still open, innermost last.
class TreeBuilder {
 public:
  explicit TreeBuilder(const std::string& path) : path_(path) {}

  /// One parse event; an error names the line.
  Status Take(const yaml_event_t& e) {
    const int line = static_cast<int>(e.start_mark.line) + 1;
    const std::string where = path_ + ":" + std::to_string(line);
    switch (e.type) {
      case YAML_ALIAS_EVENT:
        return InvalidArgumentError(where + ": YAML aliases (*name) are not supported in this file");
      case YAML_SCALAR_EVENT: {
        YamlNode node;
        node.line = line;
        node.scalar.assign(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
        // A plain ~, null or empty value is YAML's null.
        const bool plain = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        const std::string& v = node.scalar;
        node.kind = plain && (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") ? YamlNode::Kind::kNull
                                                                                                   : YamlNode::Kind::kScalar;
        return Place(std::move(node), where, /*container=*/false);
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (open_.size() >= kMaxDepth) return InvalidArgumentError(where + ": nested too deeply (over 64 levels)");
        YamlNode node;
        node.line = line;
        node.kind = e.type == YAML_SEQUENCE_START_EVENT ? YamlNode::Kind::kSequence : YamlNode::Kind::kMapping;
        return Place(std::move(node), where, /*container=*/true);
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        if (!open_.empty()) open_.pop_back();
        return Status::Ok();
      default: return Status::Ok();
    }
  }

  YamlNode TakeRoot() { return std::move(root_); }

 private:
  struct Open {
    YamlNode* node;
    std::unordered_set<std::string> keys;  // a mapping's, for duplicates in constant time
    bool have_key = false;
    std::string key;
    int key_line = 0;
  };

  Status Place(YamlNode node, const std::string& where, bool container) {
    if (++nodes_ > kMaxNodes) return InvalidArgumentError(where + ": more than 100,000 values");
    YamlNode* placed = nullptr;
    if (open_.empty()) {
      root_ = std::move(node);
      placed = &root_;
    } else if (Open& parent = open_.back(); parent.node->kind == YamlNode::Kind::kSequence) {
      parent.node->items.push_back(std::move(node));
      placed = &parent.node->items.back();
    } else if (!parent.have_key) {
      if (container) return InvalidArgumentError(where + ": a mapping key must be a plain value");
      if (!parent.keys.insert(node.scalar).second)
        return InvalidArgumentError(where + ": duplicate key '" + node.scalar + "'");
      parent.have_key = true;
      parent.key = std::move(node.scalar);
      parent.key_line = node.line;
      return Status::Ok();
    } else {
      node.key_line = parent.key_line;
      parent.node->members.push_back(YamlMember{std::move(parent.key), std::move(node)});
      parent.have_key = false;
      placed = &parent.node->members.back().value;
    }
    // Only the last child of an open container can itself be open, so a
    // container's vector never moves a node the stack points at.
    if (container) open_.push_back(Open{placed, {}, false, {}, 0});
    return Status::Ok();
  }

  const std::string& path_;
  YamlNode root_;
  std::vector<Open> open_;
  int64_t nodes_ = 0;
};

}  // namespace

StatusOr<YamlNode> ParseYaml(const std::string& text, const std::string& path) {
  if (text.find('\0') != std::string::npos) return InvalidArgumentError(path + ": not a text file (NUL byte)");
  if (text.size() > kMaxBytes) return InvalidArgumentError(path + ": over 1 MiB (not a configuration file?)");
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return InternalError("libyaml: cannot initialise a parser");
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  TreeBuilder tree(path);
  Status status = Status::Ok();
  for (bool done = false; !done && status.ok();) {
    yaml_event_t event;
    if (!yaml_parser_parse(&parser, &event)) {
      const std::string message = parser.problem ? parser.problem : "syntax error";
      status = InvalidArgumentError(path + ":" + std::to_string(parser.problem_mark.line + 1) + ":" +
                                    std::to_string(parser.problem_mark.column + 1) + ": " + message);
      break;
    }
    // The first document is the file's: what follows it is not read.
    done = event.type == YAML_DOCUMENT_END_EVENT || event.type == YAML_STREAM_END_EVENT;
    status = tree.Take(event);
    yaml_event_delete(&event);
  }
  yaml_parser_delete(&parser);
  if (!status.ok()) return status;
  return tree.TakeRoot();
}

}  // namespace gputriage
