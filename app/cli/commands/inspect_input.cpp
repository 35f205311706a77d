// `embedscope inspect-input`: what a workload's input looks like per feature (ids per bag,
// distinct ids, skew, out-of-range ids), read from its source (synthetic generator or files)
// over the batches a run would train on, without training.

#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/input/input_stats.h"
#include "workload_args.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

// The workload flags that change nothing in the batches a run reads (those are the workload's
// input, --devices, --steps, --warmup-steps and --batch-size): hidden from --help and refused,
// rather than taken and ignored. --backend among them: nothing runs on a backend here, so the
// workload's backend is not resolved either (a cuda workload is inspected without a GPU).
const std::vector<std::string> kNotForInspectInput = {
    "--sharding", "--local-world-size", "--backend", "--pipeline", "--qcomms", "--dense-precision",
    "--simulate", "--nodes", "--gpus-per-node", "--network-bandwidth", "--network-latency", "--sequence-parallel"};

// Features of hashed tables (hash_size): the raw ids above become the rows the table stores,
// XXH64(id) mod hash_size; their distinct stored rows, skew over those rows and the collisions a
// run counts. "" when no table is hashed.
std::string hashed_features_text(const std::vector<es::FeatureInputStats>& features, int devices) {
  bool any = false;
  for (const auto& s : features) any |= s.hash_size > 0;
  if (!any) return "";
  std::string out = fmt::format("\nhashed tables: the ids above as the rows they are stored in (XXH64(id) mod hash_size)\n"
                                "{:<16} {:<16} {:>12} {:>14} {:>8} {:>8} {:>12} {:>17}\n",
                                "feature", "table", "stored rows", "distinct (all)", "top 1%", "top 10%", "collisions",
                                "collisions/batch");
  for (const auto& s : features)
    if (s.hash_size > 0)
      out += fmt::format("{:<16} {:<16} {:>12} {:>14} {:>7.1f}% {:>7.1f}% {:>12} {:>17.1f}\n", s.feature, s.table,
                         s.hash_size, s.distinct_stored_rows, 100 * s.stored_top1_share, 100 * s.stored_top10_share,
                         s.collisions, s.collisions_per_batch);
  out += fmt::format("distinct (all): stored rows looked up at least once; top 1% / 10%: share of the lookups on the "
                     "hottest ceil(1% / 10% of hash_size) stored rows; collisions: the distinct ids of a batch that "
                     "share their stored row with another distinct id of it (over all the table's features), summed "
                     "over the batches - a run's collisions/step is collisions/batch x {} devices\n",
                     devices);
  return out;
}

int cmd_inspect_input(WorkloadArgs& a, bool as_json) {
  refuse_hidden_workload_options(a, kNotForInspectInput,
                                 "not for inspect-input: it reads the batches a run would train on, which only the "
                                 "workload's input, --devices, --steps, --warmup-steps and --batch-size change");
  a.resolve_backend = false;
  const es::WorkloadSpec spec = load(a);
  const es::InputInspection inspection = es::inspect_input(spec);
  const auto& result = inspection.features;
  const int64_t samples = inspection.samples, skipped = inspection.skipped_lines;
  if (as_json) {
    json j = {{"workload", spec.name},
              {"input", es::enum_name(spec.input.kind)},
              {"paths", spec.input.paths},
              {"batches", inspection.batches},
              {"samples", samples},
              {"skipped_lines", skipped},
              {"features", json::array()}};
    for (const auto& s : result)
      j["features"].push_back({{"feature", s.feature},
                               {"table", s.table},
                               {"num_embeddings", s.num_embeddings},
                               {"bags", s.bags},
                               {"ids", s.ids},
                               {"ids_per_bag_mean", s.ids_per_bag_mean},
                               {"ids_per_bag_p99", s.ids_per_bag_p99},
                               {"ids_per_bag_max", s.ids_per_bag_max},
                               {"distinct_ids", s.distinct_ids},
                               {"top1_rows", s.hot_rows_1},
                               {"top1_share", s.top1_share},
                               {"top10_rows", s.hot_rows_10},
                               {"top10_share", s.top10_share},
                               {"out_of_range_ids", s.out_of_range}});
    for (size_t f = 0; f < result.size(); ++f) {  // a hashed table's ids as the rows it stores
      const auto& s = result[f];
      j["features"][f]["hashed"] =
          s.hash_size <= 0 ? json()
                           : json{{"hash_size", s.hash_size},
                                  {"distinct_stored_rows", s.distinct_stored_rows},
                                  {"top1_stored_rows", s.stored_hot_rows_1},
                                  {"top1_share", s.stored_top1_share},
                                  {"top10_stored_rows", s.stored_hot_rows_10},
                                  {"top10_share", s.stored_top10_share},
                                  {"collisions", s.collisions},
                                  {"collisions_per_batch", s.collisions_per_batch}};
    }
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: {} input{}; {} batches ((warmup {} + steps {}) x {} devices) of {} samples = {} samples",
                           spec.name, es::enum_name(spec.input.kind),
                           spec.input.paths.empty() ? "" : fmt::format(" {}", spec.input.paths), inspection.batches,
                           spec.warmup_steps, spec.steps, spec.devices.count, spec.batch_size, samples);
  if (skipped > 0) std::cout << fmt::format("; {} malformed lines skipped", skipped);
  std::cout << "\n";
  std::cout << fmt::format("{:<16} {:<16} {:>12} {:>9} {:>5} {:>5} {:>14} {:>8} {:>8} {:>12}\n", "feature", "table", "rows",
                           "ids/bag", "p99", "max", "distinct (all)", "top 1%", "top 10%", "out of range");
  for (const auto& s : result)
    std::cout << fmt::format("{:<16} {:<16} {:>12} {:>9.3f} {:>5} {:>5} {:>14} {:>7.1f}% {:>7.1f}% {:>12}\n", s.feature,
                             s.table, s.num_embeddings, s.ids_per_bag_mean, s.ids_per_bag_p99, s.ids_per_bag_max,
                             s.distinct_ids, 100 * s.top1_share, 100 * s.top10_share, s.out_of_range);
  std::cout << "top 1% / 10%: share of the in-range lookups on the hottest ceil(1% / 10% of the table's rows) rows\n";
  // tester51 F8: two measures of "distinct rows", each named
  std::cout << "distinct (all): in-range rows looked up at least once over all these batches, a row once however many "
               "steps name it (`run`'s \"rows updated\" counts each step's distinct rows, summed over the steps)\n";
  std::cout << hashed_features_text(result, spec.devices.count);
  return 0;
}

struct InspectInputState {
  WorkloadArgs args;
  bool json = false;
};

}  // namespace

Command add_inspect_input_command(CLI::App& app) {
  auto s = std::make_shared<InspectInputState>();
  auto* cmd = app.add_subcommand(
      "inspect-input", "Show per feature what a workload's input looks like (ids per bag, distinct ids, skew, out-of-range "
                       "ids), from its synthetic generator or its files, without training");
  add_workload_options(cmd, s->args);
  hide_workload_options(cmd, s->args, kNotForInspectInput);
  cmd->add_flag("--json", s->json, "Print the figures as JSON");
  return {cmd, [s] { return cmd_inspect_input(s->args, s->json); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
