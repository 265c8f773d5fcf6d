// PyTorch's caching-allocator snapshot (torch.cuda.memory._dump_snapshot, or
// _snapshot() pickled) as a recording: per device, the state at the snapshot
// (segments, blocks by state, allocated and reserved bytes), the history it kept
// as a memory curve (alloc and free_completed move allocated; segment_alloc and
// segment_free reserved), anchored at the snapshot's state, and the
// out-of-memory entries with their request. docs/memory.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gputriage/model.h"
#include "gputriage/status.h"
#include "src/util/byte_source.h"

namespace gputriage {

/// The first bytes of a binary pickle (protocol 2 and later: PROTO, then 2..5).
bool LooksLikePickle(std::string_view head);

/// A snapshot read from its pickle's bytes; `name` for messages and the source path.
StatusOr<Recording> AllocatorSnapshotFromBytes(std::string_view bytes, const std::string& name);

/// The same from an opened source (gzip and zstd undone), at most 1 GiB of pickle.
StatusOr<Recording> ImportAllocatorSnapshot(std::unique_ptr<ByteSource> source);

}  // namespace gputriage
