#pragma once
// The packed form of a lane's ops in table `op_blocks` (schema 12; FORMAT.md gives the byte
// layout): the writer packs every lane at close, the reader unpacks a whole lane at once.
// Private to the sessions library.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"

struct sqlite3_stmt;

namespace embedscope::sessions::detail {

/// Ops per block (the last block of a lane holds the rest): the writer holds up to one block's
/// bytes per lane (about 190 KB) while the run goes on.
inline constexpr size_t kOpsPerBlock = 16384;

/// Packs ops (one lane's, in the order of the ops key) into one block's bytes, one op at a time:
/// per op seven LEB128 varints (start delta, duration, category, name id, step delta, bytes,
/// correlation delta; all but the category zigzag-coded), about 11 bytes an op. Rank and lane
/// are not stored. The writer keeps one per lane while the run goes on.
class OpPacker {
 public:
  /// Appends `o` (its rank and lane are not stored; the caller keeps the lane's order).
  void add(const OpRecord& o);
  /// Ops added since the last clear().
  size_t count() const { return count_; }
  /// The block's bytes so far (the `data` column of its op_blocks row).
  const std::string& data() const { return data_; }
  /// Empties the block (the next op is the first of a new block).
  void clear();

 private:
  std::string data_;
  size_t count_ = 0;
  uint64_t start_ = 0, step_ = 0, corr_ = 0;  // the previous op's (unsigned: differences wrap)
};

/// The bytes of one block of `n` ops (an OpPacker fed with them).
std::string pack_ops(const OpRecord* ops, size_t n);

/// A block that does not unpack: bytes cut short or left over, an op count that does not
/// match, a category out of range. what() says which (the reader adds the file name).
class BadBlock : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Unpacks a block of `count` ops written by pack_ops, appending them to `out` with `rank` and
/// `lane` set. Throws BadBlock (`out` may then hold part of the block).
void unpack_ops(const void* data, size_t size, int64_t count, int32_t rank, int32_t lane, std::vector<OpRecord>& out);

/// The columns of an ops row as OpRecord holds them (the select list of op_from_row).
inline constexpr const char* kOpColumns =
    "lane_key >> 8, lane_key & 255, category, name_id, step, start_ns, end_ns, bytes, correlation";
/// The OpRecord of the current row of `st` (selected with kOpColumns first). Throws SessionError
/// naming `path` for a category out of range (a damaged file).
OpRecord op_from_row(sqlite3_stmt* st, const std::string& path);

}  // namespace embedscope::sessions::detail
