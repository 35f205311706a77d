#include "embedscope/sessions/analysis/model_quality.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/analysis/table_storage.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

ModelQuality model_quality(const SessionReader& session) {
  ModelQuality q;
  const auto held = nlohmann::json::parse(session.meta(meta::kHeldOutJson, ""), nullptr, false);
  if (held.is_object()) {
    if (held.contains("loss") && held["loss"].is_number()) q.held_out_loss = held["loss"].get<double>();
    if (held.contains("auc") && held["auc"].is_number()) q.held_out_auc = held["auc"].get<double>();
    if (held.contains("samples") && held["samples"].is_number_integer()) q.held_out_samples = held["samples"].get<int64_t>();
    if (q.held_out_auc) q.held_out_auc_se = held_out_auc_se(session);
  }
  const std::string storage = session.meta(meta::kTableStorageJson, "");
  const auto parsed = nlohmann::json::parse(storage, nullptr, false);
  if (!parsed.is_array()) return q;
  std::set<int64_t> steps;
  for (const auto& s : session.steps())
    if (s.step >= 0) steps.insert(s.step);
  const std::vector<TableStorageRow> rows = table_storage_rows(storage, static_cast<int64_t>(steps.size()));
  q.has_storage = true;
  for (const auto& r : rows) {
    q.table_weight_bytes += r.weight_bytes;
    q.optimizer_state_bytes += r.optimizer_state_bytes;
    if (r.relative_error && (r.data_type != "fp32" || r.state != "fp32"))
      q.max_relative_error = std::max(q.max_relative_error.value_or(0.0), *r.relative_error);
    if (r.collisions_per_step && r.hash_size > 0) q.collisions_per_step = q.collisions_per_step.value_or(0.0) + *r.collisions_per_step;
  }
  return q;
}

nlohmann::json model_quality_json(const ModelQuality& q) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"held_out_loss", opt(q.held_out_loss)},
          {"held_out_auc", opt(q.held_out_auc)},
          {"held_out_auc_se", opt(q.held_out_auc_se)},
          {"held_out_samples", q.held_out_samples},
          {"table_weight_bytes", q.has_storage ? nlohmann::json(q.table_weight_bytes) : nlohmann::json()},
          {"optimizer_state_bytes", q.has_storage ? nlohmann::json(q.optimizer_state_bytes) : nlohmann::json()},
          {"max_relative_error", opt(q.max_relative_error)},
          {"collisions_per_step", opt(q.collisions_per_step)}};
}

std::optional<size_t> best_held_out_loss(const std::vector<ModelQuality>& q) {
  std::optional<size_t> best;
  for (size_t i = 0; i < q.size(); ++i)
    if (q[i].held_out_loss && (!best || *q[i].held_out_loss < *q[*best].held_out_loss)) best = i;
  return best;
}

std::string model_quality_text(const std::vector<std::string>& labels, const std::vector<ModelQuality>& q) {
  if (labels.size() != q.size())
    throw std::invalid_argument(fmt::format("model_quality_text: {} labels for {} sessions", labels.size(), q.size()));
  bool any = false;
  for (const auto& m : q) any |= m.held_out_loss || m.held_out_auc || m.has_storage;
  if (!any) return "";
  const std::optional<size_t> best = best_held_out_loss(q);
  auto dash = [](const std::optional<double>& v, const char* f) {
    return v ? fmt::format(fmt::runtime(f), *v) : std::string("-");
  };
  std::vector<std::vector<std::string>> cells(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    const ModelQuality& m = q[i];
    std::string loss = dash(m.held_out_loss, "{:.4f}");
    if (i > 0 && m.held_out_loss && q[0].held_out_loss && *q[0].held_out_loss > 0)
      loss += fmt::format(" ({:+.1f} %)", 100.0 * (*m.held_out_loss / *q[0].held_out_loss - 1.0));
    if (best && *best == i && q.size() > 1) loss += " lowest";
    cells[i] = {loss,
                dash(m.held_out_auc, "{:.4f}"),
                dash(m.held_out_auc_se, "{:.4f}"),
                m.has_storage ? format_bytes(m.table_weight_bytes) : "-",
                m.has_storage ? format_bytes(m.optimizer_state_bytes) : "-",
                dash(m.max_relative_error, "{:.3g}"),
                dash(m.collisions_per_step, "{:.1f}")};
  }
  const char* names[] = {"held-out loss", "held-out AUC", "held-out AUC SE", "table weights", "optimizer state",
                         "stored-row error", "collisions/step"};
  std::vector<size_t> width(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    width[i] = labels[i].size();
    for (const auto& c : cells[i]) width[i] = std::max(width[i], c.size());
  }
  std::string out = fmt::format("{:<18}", "");
  for (size_t i = 0; i < q.size(); ++i) out += fmt::format("  {:>{}}", labels[i], width[i]);
  out += "\n";
  for (size_t row = 0; row < std::size(names); ++row) {
    out += fmt::format("{:<18}", names[row]);
    for (size_t i = 0; i < q.size(); ++i) out += fmt::format("  {:>{}}", cells[i][row], width[i]);
    out += "\n";
  }
  return out;
}

ModelQualityBlock model_quality_block(const std::vector<const SessionReader*>& sessions,
                                      const std::vector<std::string>& labels) {
  if (labels.size() != sessions.size())
    throw std::invalid_argument(fmt::format("model_quality_block: {} labels for {} sessions", labels.size(), sessions.size()));
  ModelQualityBlock b;
  for (const SessionReader* s : sessions) b.figures.push_back(model_quality(*s));
  const std::string table = model_quality_text(labels, b.figures);
  if (!table.empty())
    b.text = "\nheld-out figures and table storage (judge remedies by the held-out loss; bytes over all ranks):\n" + table;
  const std::optional<size_t> best = best_held_out_loss(b.figures);
  b.json = nlohmann::json::array();
  for (size_t i = 0; i < b.figures.size(); ++i) {
    nlohmann::json j = model_quality_json(b.figures[i]);
    j["lowest_held_out_loss"] = best && *best == i;
    if (i > 0) {
      const auto &a = b.figures[i].held_out_loss, &f = b.figures[0].held_out_loss;
      j["held_out_loss_vs_first"] = a && f && *f > 0 ? nlohmann::json(*a / *f - 1.0) : nlohmann::json();
    }
    b.json.push_back(std::move(j));
  }
  return b;
}

}  // namespace embedscope::sessions
