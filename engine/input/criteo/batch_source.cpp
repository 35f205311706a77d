// CriteoBatchSource: global batches of a Criteo stream, each rank's slice (criteo.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/input/criteo.h"

namespace embedscope::engine {

CriteoBatchSource::CriteoBatchSource(const WorkloadSpec& spec)
    : SequentialBatchSource(spec.devices.count), spec_(spec), stream_(spec.input.paths) {
  if (spec.features.size() != static_cast<size_t>(kCriteoCategoricalFeatures))
    throw InputFileError(fmt::format("criteo_tsv input: the files have {} categorical columns, mapped in order to the "
                                     "workload's features, but the workload has {} feature(s)",
                                     kCriteoCategoricalFeatures, spec.features.size()));
  if (spec.dense && spec.dense->num_dense_features != kCriteoDenseFeatures)
    throw InputFileError(fmt::format("criteo_tsv input: the files have {} integer columns, but dense.num_dense_features is {}",
                                     kCriteoDenseFeatures, spec.dense->num_dense_features));
  const FeatureIndex index(spec);
  for (int t : index.table_of_feature()) rows_.push_back(spec.tables[static_cast<size_t>(t)].num_embeddings);
}

bool CriteoBatchSource::next_sample(CriteoSample& s, int64_t& skipped) {
  std::string_view line;
  for (;;) {
    if (!stream_.next(line)) {
      if (spec_.input.on_short == ShortInputPolicy::wrap && pass_samples_ > 0) {
        stream_.rewind();
        pass_samples_ = 0;
        continue;
      }
      return false;
    }
    if (auto err = parse_criteo_line(line, spec_.input.categorical, s)) {
      if (spec_.input.malformed_lines == MalformedLinePolicy::skip) {
        ++skipped;
        continue;
      }
      throw InputFileError(fmt::format("{}: line {}: field {} ({}): {}; set \"input\": {{\"malformed_lines\": \"skip\"}} "
                                       "to skip such lines",
                                       stream_.file(), stream_.line_number(), err->field + 1,
                                       criteo_field_name(err->field), err->reason));
    }
    ++pass_samples_;
    ++total_samples_;
    return true;
  }
}

std::vector<Batch> CriteoBatchSource::read_global(int64_t iteration) {
  const int W = spec_.devices.count;
  const int64_t B = spec_.batch_size;
  const int F = kCriteoCategoricalFeatures;
  const int nd = spec_.dense ? kCriteoDenseFeatures : 0;
  std::vector<Batch> g;
  std::vector<CriteoSample> samples(static_cast<size_t>(B));
  for (int r = 0; r < W; ++r) {
    Batch batch;
    std::string first_file;
    int64_t first_line = 0;
    for (int64_t b = 0; b < B; ++b) {
      if (!next_sample(samples[static_cast<size_t>(b)], batch.skipped_lines)) {
        const int64_t needed = (spec_.warmup_steps + spec_.steps) * B * W;
        throw InputFileError(fmt::format(
            "criteo_tsv input {}: the run needs {} samples ((warmup_steps {} + steps {}) x batch_size {} x devices {}), "
            "the files hold {}{}; set \"input\": {{\"on_short\": \"wrap\"}} to read them again from the start",
            spec_.input.paths, needed, spec_.warmup_steps, spec_.steps, B, W, total_samples_,
            spec_.input.on_short == ShortInputPolicy::wrap ? " (none of them a valid sample)" : ""));
      }
      if (b == 0) {
        first_file = stream_.file();
        first_line = stream_.line_number();
      }
    }
    batch.origin = stream_.file() == first_file && stream_.line_number() >= first_line
                       ? fmt::format("{}: batch {} (lines {}-{})", first_file, iteration, first_line, stream_.line_number())
                       : fmt::format("{}: batch {} (line {} to {} line {})", first_file, iteration, first_line,
                                     stream_.file(), stream_.line_number());
    KJT& kjt = batch.kjt;
    kjt.batch_size = B;
    kjt.num_features = F;
    kjt.lengths.assign(static_cast<size_t>(F * B), 0);
    kjt.values.reserve(static_cast<size_t>(F * B));
    for (int f = 0; f < F; ++f)
      for (int64_t b = 0; b < B; ++b) {
        const CriteoSample& s = samples[static_cast<size_t>(b)];
        if (!s.present[static_cast<size_t>(f)]) continue;
        kjt.lengths[static_cast<size_t>(f * B + b)] = 1;
        kjt.values.push_back(criteo_row(s.categorical[static_cast<size_t>(f)], spec_.input.categorical,
                                        rows_[static_cast<size_t>(f)]));
      }
    batch.dense.resize(static_cast<size_t>(B * nd));
    batch.labels.resize(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const CriteoSample& s = samples[static_cast<size_t>(b)];
      for (int j = 0; j < nd; ++j) batch.dense[static_cast<size_t>(b * nd + j)] = criteo_dense_value(s.dense[static_cast<size_t>(j)]);
      batch.labels[static_cast<size_t>(b)] = s.label;
    }
    g.push_back(std::move(batch));
  }
  return g;
}

void CriteoBatchSource::check_before_run(const WorkloadSpec& spec) {
  const int64_t needed = (spec.warmup_steps + spec.steps) * spec.batch_size * spec.devices.count;
  CriteoStream stream(spec.input.paths);
  CriteoSample s;
  std::string_view line;
  int64_t valid = 0;
  while (valid < needed && stream.next(line)) {
    if (auto err = parse_criteo_line(line, spec.input.categorical, s)) {
      if (spec.input.malformed_lines == MalformedLinePolicy::skip) continue;
      throw InputFileError(fmt::format("{}: line {}: field {} ({}): {}; set \"input\": {{\"malformed_lines\": \"skip\"}} "
                                       "to skip such lines",
                                       stream.file(), stream.line_number(), err->field + 1,
                                       criteo_field_name(err->field), err->reason));
    }
    ++valid;
  }
  if (valid >= needed || (spec.input.on_short == ShortInputPolicy::wrap && valid > 0)) return;
  throw InputFileError(fmt::format(
      "criteo_tsv input {}: the run needs {} samples ((warmup_steps {} + steps {}) x batch_size {} x devices {}), "
      "the files hold {}{}; set \"input\": {{\"on_short\": \"wrap\"}} to read them again from the start",
      spec.input.paths, needed, spec.warmup_steps, spec.steps, spec.batch_size, spec.devices.count, valid,
      spec.input.on_short == ShortInputPolicy::wrap ? " (none of them a valid sample)" : ""));
}

void CriteoBatchSource::rewind() {
  stream_.rewind();
  pass_samples_ = total_samples_ = 0;
}

}  // namespace embedscope::engine
