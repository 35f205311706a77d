#pragma once
// The Criteo Kaggle / Terabyte text format as training input (engine/input/criteo/FORMAT.md):
// one sample per line, 40 tab-separated fields: the label (0 or 1), 13 integer ("dense")
// features, 26 categorical features as hexadecimal strings; any field but the label may be
// empty. Read as a stream (zlib's gzread: plain text or gzip, told apart by zlib), one buffer
// at a time, so a file larger than memory works.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "embedscope/engine/input/source.h"

namespace embedscope::engine {

constexpr int kCriteoDenseFeatures = 13;
constexpr int kCriteoCategoricalFeatures = 26;
constexpr int kCriteoFields = 1 + kCriteoDenseFeatures + kCriteoCategoricalFeatures;  ///< 40

/// One parsed line. dense: the integers as written (an empty field is 0). categorical: the
/// value of each column, present[k] false for an empty field; under CategoricalMapping modulo
/// the unsigned hexadecimal value (up to 16 digits), under raw the signed one (an optional
/// leading '-', |value| < 2^63) stored as its two's complement bits.
struct CriteoSample {
  float label = 0;
  std::array<int64_t, kCriteoDenseFeatures> dense{};
  std::array<uint64_t, kCriteoCategoricalFeatures> categorical{};
  std::array<bool, kCriteoCategoricalFeatures> present{};
};

/// Why a line is malformed: the field (0-based column: 0 the label, 1..13 the integers
/// I1..I13, 14..39 the categoricals C1..C26) and the reason.
struct CriteoParseError {
  int field = 0;
  std::string reason;
};

/// The name of column `field` as the Criteo README names it: "label", "I1".."I13", "C1".."C26".
std::string criteo_field_name(int field);

/// Parses one line (without its '\n'; a trailing '\r' is ignored). Malformed: not exactly 40
/// fields, a label other than 0 or 1, a non-decimal integer, a non-hexadecimal categorical, or
/// a value that does not fit 64 bits. O(line length), no allocation on success.
std::optional<CriteoParseError> parse_criteo_line(std::string_view line, CategoricalMapping mapping,
                                                  CriteoSample& out);

/// DLRM's dense transform: log(1 + x) with negative values taken as 0 (facebookresearch/dlrm
/// dlrm_data_pytorch.py, collate_wrapper_criteo_offset: torch.log(X_int + 1); data_utils.py
/// clips negative integers to 0).
float criteo_dense_value(int64_t x);

/// The row of categorical value `v` in a table of `num_embeddings` rows: modulo: v mod
/// num_embeddings (DLRM's --max-ind-range: dlrm_data_pytorch.py CriteoDataset.__getitem__
/// returns X_cat % max_ind_range); raw: v itself (as int64), which may lie outside the table.
int64_t criteo_row(uint64_t v, CategoricalMapping mapping, int64_t num_embeddings);

/// The lines of several files read in order as one stream, through zlib (gzip or plain text).
/// Memory: one 1 MiB buffer plus the longest line. Throws InputFileError naming the file for a
/// file that cannot be opened or read (a truncated gzip file: "unexpected end of file") and for
/// a line longer than kMaxLineBytes.
class CriteoStream {
 public:
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;
  /// Opens the first file (so a missing one fails here).
  explicit CriteoStream(std::vector<std::string> paths);
  ~CriteoStream();
  CriteoStream(const CriteoStream&) = delete;
  CriteoStream& operator=(const CriteoStream&) = delete;
  /// The next line without its '\n', valid until the next call; false after the last line of
  /// the last file. A last line without '\n' is still a line.
  bool next(std::string_view& line);
  /// Back to the first line of the first file.
  void rewind();
  /// The file and the 1-based number of the line next() returned last.
  const std::string& file() const { return paths_[file_]; }
  int64_t line_number() const { return line_; }

 private:
  void open(size_t k);
  bool fill();  // reads more of the current file into buf_; false at its end
  std::vector<std::string> paths_;
  size_t file_ = 0;
  void* gz_ = nullptr;  // gzFile
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;  // unread bytes of buf_
  std::string carry_;           // a line that spans buffers
  int64_t line_ = 0;
  bool eof_ = false;            // the current file is exhausted
};

/// spec.input criteo_tsv: every global batch is the next batch_size x devices.count samples of
/// the stream; rank r takes samples [r B, (r+1) B). Feature f (WorkloadSpec::features order) is
/// categorical column f: its bag holds the sample's one id (criteo_row), or nothing for an
/// empty field. Dense features criteo_dense_value, labels the label column. Malformed lines:
/// InputFileError naming file, line and field (malformed_lines error) or skipped and counted
/// in the batch of the rank whose sample comes next (skip). Fewer samples than the run needs
/// ((warmup_steps + steps) x batch_size x devices.count): InputFileError naming both counts
/// (on_short error) or the stream starts again (wrap). Once a read fails, every later make()
/// throws the same error (so every rank stops). Memory: the global batches not yet taken by
/// every rank (at most a few: the ranks are in step).
class CriteoBatchSource final : public SequentialBatchSource {
 public:
  /// The run's Criteo input read once up front, before anything runs (tester49 F11: a short
  /// file was found after 6 trained steps, a malformed line in step 1): the lines up to the
  /// (warmup_steps + steps) x batch_size x devices.count valid samples the run needs (the end
  /// of the files if they hold fewer) are parsed. Throws InputFileError, with the text the run
  /// would give, for the first malformed line (malformed_lines error) and for files that hold
  /// fewer valid samples than the run needs (on_short error), or none (wrap). Cost: one more
  /// pass over the lines the run reads (decompressing them again for .gz files).
  static void check_before_run(const WorkloadSpec& spec);
  explicit CriteoBatchSource(const WorkloadSpec& spec);

 private:
  std::vector<Batch> read_global(int64_t iteration) override;
  void rewind() override;
  bool next_sample(CriteoSample& s, int64_t& skipped);
  const WorkloadSpec& spec_;
  std::vector<int64_t> rows_;  // per feature: num_embeddings of its table
  CriteoStream stream_;
  int64_t pass_samples_ = 0;   // valid samples read in this pass over the files
  int64_t total_samples_ = 0;  // valid samples read in all
};

}  // namespace embedscope::engine
