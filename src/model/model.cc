#include "gputriage/model.h"

namespace gputriage {

StringTable::StringTable() {
  strings_.emplace_back();
  index_.emplace(std::string_view(strings_.back()), kNoName);
}

NameId StringTable::Intern(std::string_view text) {
  if (auto it = index_.find(text); it != index_.end()) return it->second;
  strings_.emplace_back(text);
  const auto id = static_cast<NameId>(strings_.size() - 1);
  index_.emplace(std::string_view(strings_.back()), id);
  return id;
}

const char* VendorName(Vendor vendor) {
  switch (vendor) {
    case Vendor::kNvidia: return "nvidia";
    case Vendor::kAmd: return "amd";
    case Vendor::kIntel: return "intel";
    case Vendor::kMeta: return "meta";
    case Vendor::kUnknown: break;
  }
  return "unknown";
}

const char* MemoryOpKindName(MemoryOpKind kind) {
  switch (kind) {
    case MemoryOpKind::kMemcpyHtoD: return "memcpy_htod";
    case MemoryOpKind::kMemcpyDtoH: return "memcpy_dtoh";
    case MemoryOpKind::kMemcpyDtoD: return "memcpy_dtod";
    case MemoryOpKind::kMemcpyHtoH: return "memcpy_htoh";
    case MemoryOpKind::kMemcpyPtoP: return "memcpy_ptop";
    case MemoryOpKind::kMemcpyOther: return "memcpy";
    case MemoryOpKind::kMemset: return "memset";
  }
  return "memcpy";
}

void ImportStats::AddIssue(IssueSeverity severity, std::string_view kind, std::string message) {
  for (auto& issue : issues) {
    if (issue.kind == kind) {
      ++issue.count;
      return;
    }
  }
  issues.push_back(ImportIssue{severity, std::string(kind), std::move(message), 1});
}

const ImportIssue* ImportStats::FindIssue(std::string_view kind) const {
  for (const auto& issue : issues)
    if (issue.kind == kind) return &issue;
  return nullptr;
}

const Device* Recording::FindDevice(int id) const {
  for (const auto& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

}  // namespace gputriage
