#include "src/util/yaml_tree.h"

#include <yaml.h>

#include <cstdint>
#include <memory>

namespace gputriage {
namespace {

struct DocumentDeleter {
  void operator()(yaml_document_t* d) const {
    yaml_document_delete(d);
    delete d;
  }
};

constexpr int kMaxDepth = 64;
// Aliases make shared nodes, which the tree copies: a bound on the copies stops
// an alias bomb (a few lines that expand to billions of nodes).
constexpr int64_t kMaxNodes = 100'000;

Status Convert(yaml_document_t* doc, yaml_node_t* node, const std::string& path, int depth, int64_t* nodes,
               YamlNode* out) {
  out->line = static_cast<int>(node->start_mark.line) + 1;
  const std::string where = path + ":" + std::to_string(out->line);
  if (depth > kMaxDepth) return InvalidArgumentError(where + ": nested too deeply");
  if (++*nodes > kMaxNodes) return InvalidArgumentError(where + ": more than 100,000 values (aliases expanding?)");
  switch (node->type) {
    case YAML_SCALAR_NODE: {
      out->scalar.assign(reinterpret_cast<const char*>(node->data.scalar.value), node->data.scalar.length);
      // A plain ~, null or empty value is YAML's null.
      const bool plain = node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
      out->kind = plain && (out->scalar.empty() || out->scalar == "~" || out->scalar == "null" || out->scalar == "Null" ||
                            out->scalar == "NULL")
                      ? YamlNode::Kind::kNull
                      : YamlNode::Kind::kScalar;
      return Status::Ok();
    }
    case YAML_SEQUENCE_NODE:
      out->kind = YamlNode::Kind::kSequence;
      for (yaml_node_item_t* i = node->data.sequence.items.start; i < node->data.sequence.items.top; ++i) {
        out->items.emplace_back();
        if (Status s = Convert(doc, yaml_document_get_node(doc, *i), path, depth + 1, nodes, &out->items.back()); !s.ok())
          return s;
      }
      return Status::Ok();
    case YAML_MAPPING_NODE:
      out->kind = YamlNode::Kind::kMapping;
      for (yaml_node_pair_t* p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; ++p) {
        yaml_node_t* key = yaml_document_get_node(doc, p->key);
        if (key == nullptr || key->type != YAML_SCALAR_NODE)
          return InvalidArgumentError(where + ": a mapping key must be a plain value");
        std::string name(reinterpret_cast<const char*>(key->data.scalar.value), key->data.scalar.length);
        if (out->Find(name) != nullptr)
          return InvalidArgumentError(path + ":" + std::to_string(key->start_mark.line + 1) + ": duplicate key '" +
                                      name + "'");
        YamlNode value;
        if (Status s = Convert(doc, yaml_document_get_node(doc, p->value), path, depth + 1, nodes, &value); !s.ok()) return s;
        value.key_line = static_cast<int>(key->start_mark.line) + 1;
        out->members.push_back(YamlMember{std::move(name), std::move(value)});
      }
      return Status::Ok();
    default:
      out->kind = YamlNode::Kind::kNull;
      return Status::Ok();
  }
}

}  // namespace

StatusOr<YamlNode> ParseYaml(const std::string& text, const std::string& path) {
  if (text.find('\0') != std::string::npos) return InvalidArgumentError(path + ": not a text file (NUL byte)");
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return InternalError("libyaml: cannot initialise a parser");
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  std::unique_ptr<yaml_document_t, DocumentDeleter> doc(new yaml_document_t{});
  const int loaded = yaml_parser_load(&parser, doc.get());
  if (!loaded) {
    const std::string message = parser.problem ? parser.problem : "syntax error";
    const std::string at = path + ":" + std::to_string(parser.problem_mark.line + 1) + ":" +
                           std::to_string(parser.problem_mark.column + 1);
    yaml_parser_delete(&parser);
    delete doc.release();  // nothing was loaded into it: only the struct to free
    return InvalidArgumentError(at + ": " + message);
  }
  yaml_parser_delete(&parser);
  YamlNode root;
  yaml_node_t* top = yaml_document_get_root_node(doc.get());
  if (top == nullptr) return root;  // an empty file
  int64_t nodes = 0;
  if (Status s = Convert(doc.get(), top, path, 0, &nodes, &root); !s.ok()) return s;
  return root;
}

}  // namespace gputriage
