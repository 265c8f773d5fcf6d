// A YAML document as a plain tree, for the small configuration files gputriage
// reads (the agent's web-config). libyaml is used only in yaml_tree.cc. Every
// node keeps its line, so an error can name the file, line and field.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gputriage/status.h"

namespace gputriage {

struct YamlMember;

struct YamlNode {
  enum class Kind { kNull, kScalar, kSequence, kMapping };
  Kind kind = Kind::kNull;
  std::string scalar;                                  // kScalar
  std::vector<YamlNode> items;                         // kSequence
  std::vector<YamlMember> members;                     // kMapping, in file order (keys are scalars)
  int line = 0;                                        // 1-based, where the value starts
  int key_line = 0;                                    // a member's: the line of its key

  const YamlNode* Find(const std::string& key) const;
};

struct YamlMember {
  std::string key;
  YamlNode value;
};

inline const YamlNode* YamlNode::Find(const std::string& key) const {
  for (const auto& m : members)
    if (m.key == key) return &m.value;
  return nullptr;
}

/// Parses the first document of `text` (`path` names it in errors). An empty
/// file is a null node. Errors: YAML syntax (with line and column), aliases
/// (not needed by any config here), non-scalar mapping keys, duplicate keys,
/// nesting over 64 levels, over 100,000 values or 1 MiB (checked as it reads).
StatusOr<YamlNode> ParseYaml(const std::string& text, const std::string& path);

}  // namespace gputriage
