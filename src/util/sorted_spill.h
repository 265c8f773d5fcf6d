// A stable external sort of fixed-size records under a memory budget: records are
// added in any order; past the budget the buffer is sorted and written to a scratch
// file as a run; readers then get every record in order through a k-way merge that
// holds one small read buffer per run (and takes from the same run, without the
// heap, while that run's head comes first: a trace's runs cover consecutive
// times). Equal records come out in the order they were added (runs are sorted
// stably and merged oldest first), so the result is
// exactly std::stable_sort's whatever the budget: a trace read in 10 MB of memory
// gives the same order, and so the same diagnosis, as one read in 10 GB.
//
//   added:   7 3 9 | 1 8 2 | 5 4        (budget: three records)
//   runs:    3 7 9   1 2 8              (on disk)   tail: 4 5 (in memory)
//   read:    1 2 3 4 5 7 8 9            (merge of the two runs and the tail)
//
// Memory: the budget while adding; while reading, one read buffer per run and the
// tail. Runs beyond `max_runs` are merged into one first, so a reader's memory is
// bounded whatever the input's size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "gputriage/status.h"
#include "src/util/spill_file.h"

namespace gputriage {

struct SpillOptions {
  size_t budget_bytes = size_t{64} << 20;      // records held in memory before a run is written
  size_t read_buffer_bytes = size_t{64} << 10;   // per run, per reader (under malloc's mmap threshold: reused, not faulted in)
  size_t max_runs = 64;                        // runs one reader merges at most
  std::string directory;                       // scratch directory ("" = $TMPDIR, else /tmp)
};

template <typename T, typename Less>
class SortedSpill {
  static_assert(std::is_trivially_copyable_v<T>, "records are written to disk as bytes");

  struct Run {
    int64_t offset = 0;  // bytes into the scratch file
    int64_t count = 0;   // records
  };

 public:
  explicit SortedSpill(SpillOptions options = {}, Less less = Less())
      : options_(std::move(options)), less_(std::move(less)) {
    capacity_ = std::max<size_t>(16, options_.budget_bytes / sizeof(T));
    options_.max_runs = std::max<size_t>(2, options_.max_runs);
  }

  /// Adds one record; may write a run (the only failure: the scratch file).
  Status Add(const T& item) {
    if (buffer_.size() == buffer_.capacity()) Grow();
    buffer_.push_back(item);
    ++size_;
    if (buffer_.size() >= capacity_) return SpillBuffer();
    return Status::Ok();
  }

  /// Adds records in order, as Add one by one would (a run's worth at once: one
  /// copy, no per-record checks).
  Status AddRange(const T* items, size_t count) {
    while (count > 0) {
      if (buffer_.size() == buffer_.capacity()) Grow();
      const size_t take = std::min(count, capacity_ - buffer_.size());
      buffer_.insert(buffer_.end(), items, items + take);
      size_ += static_cast<int64_t>(take);
      items += take;
      count -= take;
      if (buffer_.size() >= capacity_) {
        Status s = SpillBuffer();
        if (!s.ok()) return s;
      }
    }
    return Status::Ok();
  }

  /// Ends adding: sorts what is still in memory and merges runs down to max_runs.
  Status Finish() {
    // Streams often come in order already (a profiler writes each lane by time).
    if (!std::is_sorted(buffer_.begin(), buffer_.end(), less_))
      std::stable_sort(buffer_.begin(), buffer_.end(), less_);
    // Level by level: consecutive groups of max_runs runs become one run each
    // (consecutive, so equal records keep their order).
    while (runs_.size() > options_.max_runs) {
      std::vector<Run> level;
      for (size_t at = 0; at < runs_.size(); at += options_.max_runs) {
        const size_t end = std::min(runs_.size(), at + options_.max_runs);
        if (end - at == 1) {
          level.push_back(runs_[at]);
          continue;
        }
        auto merged = MergeRuns({runs_.begin() + static_cast<std::ptrdiff_t>(at), runs_.begin() + static_cast<std::ptrdiff_t>(end)});
        if (!merged.ok()) return merged.status();
        level.push_back(merged.value());
      }
      runs_ = std::move(level);
    }
    return Status::Ok();
  }

  int64_t size() const { return size_; }
  size_t runs() const { return runs_.size(); }
  int64_t spilled_bytes() const { return file_ ? file_->size() : 0; }

  /// Every record in order; several cursors may read at once. Only after Finish().
  class Cursor {
   public:
    /// The next record, false at the end or on a read error (then status() says).
    bool Next(T* out) {
      if (current_ == kNoSource) {
        if (heap_.empty()) return false;
        std::pop_heap(heap_.begin(), heap_.end(), heap_order_);
        current_ = heap_.back();
        heap_.pop_back();
      }
      *out = sources_[current_].Take();
      // The source that gave the last record usually gives the next one too (runs
      // of a trace cover consecutive times): it stays out of the heap while its
      // head comes before every other head, one comparison a record.
      if (!Refill(current_)) {
        current_ = kNoSource;
      } else if (!heap_.empty() && heap_order_(current_, heap_.front())) {
        heap_.push_back(current_);
        std::push_heap(heap_.begin(), heap_.end(), heap_order_);
        current_ = kNoSource;
      }
      return true;
    }
    const Status& status() const { return status_; }

    Cursor(Cursor&& other) noexcept
        : owner_(other.owner_), sources_(std::move(other.sources_)), heap_(std::move(other.heap_)),
          current_(other.current_), heap_order_{&sources_, other.heap_order_.less}, per_read_(other.per_read_),
          status_(std::move(other.status_)) {}
    Cursor& operator=(Cursor&& other) noexcept {
      owner_ = other.owner_;
      sources_ = std::move(other.sources_);
      heap_ = std::move(other.heap_);
      current_ = other.current_;
      heap_order_ = {&sources_, other.heap_order_.less};
      per_read_ = other.per_read_;
      status_ = std::move(other.status_);
      return *this;
    }
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;

   private:
    friend class SortedSpill;
    struct Source {
      int64_t offset = 0, remaining = 0;  // on disk, not yet buffered
      std::vector<T> buffer;
      const T* memory = nullptr;  // the in-memory tail instead of a buffer
      size_t at = 0, end = 0;
      const T& Head() const { return memory != nullptr ? memory[at] : buffer[at]; }
      T Take() { return memory != nullptr ? memory[at++] : buffer[at++]; }
    };
    struct HeapOrder {
      const std::vector<Source>* sources;
      const Less* less;
      // std::*_heap keeps the largest on top: "larger" is the one to come later;
      // on a tie the younger source (higher index) comes later, for stability.
      bool operator()(size_t a, size_t b) const {
        const T& x = (*sources)[a].Head();
        const T& y = (*sources)[b].Head();
        if ((*less)(y, x)) return true;
        if ((*less)(x, y)) return false;
        return a > b;
      }
    };
    Cursor(const SortedSpill& owner, const std::vector<Run>& runs, const std::vector<T>* tail)
        : owner_(&owner), heap_order_{&sources_, &owner.less_} {
      const size_t per = std::max<size_t>(1, owner.options_.read_buffer_bytes / sizeof(T));
      sources_.resize(runs.size() + (tail != nullptr ? 1 : 0));
      for (size_t i = 0; i < runs.size(); ++i) {
        sources_[i].offset = runs[i].offset;
        sources_[i].remaining = runs[i].count;
        sources_[i].buffer.reserve(std::min<size_t>(per, static_cast<size_t>(runs[i].count)));
      }
      if (tail != nullptr) {
        auto& t = sources_.back();
        t.memory = tail->data();
        t.end = tail->size();
      }
      per_read_ = per;
      for (size_t i = 0; i < sources_.size(); ++i)
        if (Refill(i)) heap_.push_back(i);
      std::make_heap(heap_.begin(), heap_.end(), heap_order_);
    }
    /// Makes sure source i has a head; false when it is used up (or unreadable).
    bool Refill(size_t i) {
      Source& s = sources_[i];
      if (s.at < s.end) return true;
      if (s.memory != nullptr || s.remaining == 0 || !status_.ok()) return false;
      const size_t n = static_cast<size_t>(std::min<int64_t>(s.remaining, static_cast<int64_t>(per_read_)));
      s.buffer.resize(n);
      Status read = owner_->file_->ReadAt(s.offset, s.buffer.data(), n * sizeof(T));
      if (!read.ok()) {
        status_ = read;
        heap_.clear();
        return false;
      }
      s.offset += static_cast<int64_t>(n * sizeof(T));
      s.remaining -= static_cast<int64_t>(n);
      s.at = 0;
      s.end = n;
      return true;
    }

    static constexpr size_t kNoSource = ~size_t{0};
    const SortedSpill* owner_;
    std::vector<Source> sources_;
    std::vector<size_t> heap_;  // sources with a head, but current_
    size_t current_ = kNoSource;  // the source the last record came from, out of the heap
    HeapOrder heap_order_;
    size_t per_read_ = 1;
    Status status_;
  };

  Cursor Open() const { return Cursor(*this, runs_, &buffer_); }

  /// After Finish(), when nothing was spilled: the records, sorted, moved out (no
  /// copy); the spill is empty afterwards. Empty when runs exist (read them with Open).
  std::vector<T> TakeIfInMemory() {
    if (!runs_.empty()) return {};
    size_ = 0;
    return std::move(buffer_);
  }

 private:
  Status EnsureFile() {
    if (file_) return Status::Ok();
    auto file = SpillFile::Create(options_.directory);
    if (!file.ok()) return file.status();
    file_ = std::make_unique<SpillFile>(std::move(file).value());
    return Status::Ok();
  }

  Status SpillBuffer() {
    Status s = EnsureFile();
    if (!s.ok()) return s;
    if (!std::is_sorted(buffer_.begin(), buffer_.end(), less_))
      std::stable_sort(buffer_.begin(), buffer_.end(), less_);
    auto at = file_->Append(buffer_.data(), buffer_.size() * sizeof(T));
    if (!at.ok()) return at.status();
    runs_.push_back({at.value(), static_cast<int64_t>(buffer_.size())});
    buffer_.clear();
    return Status::Ok();
  }

  /// Consecutive runs merged into one new run at the end of the scratch file.
  StatusOr<Run> MergeRuns(const std::vector<Run>& group) {
    Cursor cursor(*this, group, nullptr);
    Run merged{file_->size(), 0};
    std::vector<T> out;
    out.reserve(std::max<size_t>(1, options_.read_buffer_bytes / sizeof(T)));
    T item;
    while (cursor.Next(&item)) {
      out.push_back(item);
      if (out.size() == out.capacity()) {
        auto at = file_->Append(out.data(), out.size() * sizeof(T));
        if (!at.ok()) return at.status();
        merged.count += static_cast<int64_t>(out.size());
        out.clear();
      }
    }
    if (!cursor.status().ok()) return cursor.status();
    if (!out.empty()) {
      auto at = file_->Append(out.data(), out.size() * sizeof(T));
      if (!at.ok()) return at.status();
      merged.count += static_cast<int64_t>(out.size());
    }
    return merged;
  }

  /// The buffer's next size: doubling while small, then straight to the budget
  /// (capped), so a large stream is not copied and faulted in at every doubling.
  /// Only address space is taken: pages are touched as records arrive.
  void Grow() {
    constexpr size_t kDirectBytes = size_t{1} << 20, kMaxReserveBytes = size_t{1} << 30;
    const size_t doubled = std::max<size_t>(16, buffer_.capacity() * 2);
    const size_t direct = std::max(doubled, std::min(capacity_, kMaxReserveBytes / sizeof(T)));
    buffer_.reserve(std::min(doubled * sizeof(T) < kDirectBytes ? doubled : direct, capacity_));
  }

  SpillOptions options_;
  Less less_;
  size_t capacity_ = 0;
  std::vector<T> buffer_;
  std::vector<Run> runs_;
  std::unique_ptr<SpillFile> file_;
  int64_t size_ = 0;
};

}  // namespace gputriage
