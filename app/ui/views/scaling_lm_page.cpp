// The scaling page of an lm_embedding study (views/scaling_page.h lm_scaling_page): its lines,
// caption and the table of `embedscope scaling`'s LM columns.

#include <QLocale>

#include <algorithm>

#include "embedscope/sessions/model/unit_ladder.h"  // format_ms
#include "embedscope/sessions/model/units.h"
#include "views/scaling_page.h"
#include "views/scaling_view.h"

namespace embedscope::ui {

namespace {
// a point's type as `embedscope scaling` prints it: "+sp" for sequence parallelism
QString type_label(const engine::LmScalingPoint& p) {
  return QString(engine::to_string(p.sharding)) + (p.sequence_parallel ? "+sp" : "");
}
QString exact_bytes(int64_t b) { return QLocale::c().toString(static_cast<qlonglong>(b)); }

// The device the study ran against, as its JSON records it (the study's device_memory_bytes and
// device_name, else a point's device_memory_bytes with the study's hardware as the name); a file
// written before they were recorded falls back to the profile's name (study_device_memory).
std::pair<int64_t, QString> lm_device_memory(const engine::LmScalingStudy& st) {
  const QString name = QString::fromStdString(st.device_name.empty() ? st.hardware : st.device_name);
  if (st.device_memory_bytes > 0) return {st.device_memory_bytes, name};
  for (const auto& p : st.points)
    if (p.device_memory_bytes > 0) return {p.device_memory_bytes, name};
  return study_device_memory(st.hardware);
}
}  // namespace

ScalingPage lm_scaling_page(const engine::LmScalingStudy& st) {
  ScalingPage page;
  page.throughput_unit = "tokens/s";
  // vocab_parallel scales strongly, the other types weakly: one baseline for all
  page.efficiency_title = "scaling efficiency (tokens/s per GPU over the baseline)";
  std::tie(page.device_memory_bytes, page.device_name) = lm_device_memory(st);
  const int64_t tokens = st.micro_batch_size * st.sequence_length;  // a micro batch's, each GPU's
  const auto baseline = engine::lm_scaling_baseline(st.points);
  const QString efficiency = baseline ? efficiency_caption("tokens/s", engine::to_string(baseline->sharding), baseline->gpus,
                                                          baseline->tokens_per_s_per_gpu)
                                      : efficiency_caption("tokens/s", "", 0, 0);
  page.caption =
      QString("<b>SIMULATED</b> scaling study: %1 (lm_embedding, sequence %2 x micro batch %3) on %4 (%5 GPUs per "
              "node), every step the step program timed by the cost model. vocab_parallel: one tensor-parallel group, "
              "every GPU reads the same %6 tokens a step (strong scaling); data_parallel and row_wise: %6 tokens per "
              "GPU per step (weak scaling); +sp: sequence parallel. %7; embedding comm: the token embedding's own "
              "collectives' share of the step (rank 0); B/token: bytes on the wire per token without Embedscope's "
              "split checks.")
          .arg(QString::fromStdString(st.workload).toHtmlEscaped())
          .arg(st.sequence_length)
          .arg(st.micro_batch_size)
          .arg(QString::fromStdString(st.hardware).toHtmlEscaped())
          .arg(st.gpus_per_node)
          .arg(tokens)
          .arg(efficiency);
  page.headers = {"sharding", "GPUs",     "nodes",     "step",    "tokens/s",   "per GPU", "efficiency",
                  "emb comm", "comm",     "wire/step", "B/token", "memory/GPU", "note"};
  page.note_column = ScalingView::kLmNoteColumn;
  for (const auto& p : st.points) {
    auto& row = page.add_point(type_label(p), false,
                               {0, p.gpus, p.error, p.tokens_per_s, p.scaling_efficiency, p.embedding_comm_share,
                                p.memory_bytes_per_gpu},
                               p.nodes);
    if (!p.error.empty()) {
      // a point refused for memory records what its largest rank would need
      if (p.memory_bytes_per_gpu > 0) {
        const int64_t device = p.device_memory_bytes > 0 ? p.device_memory_bytes : page.device_memory_bytes;
        row[11] = {QString::fromStdString(sessions::format_bytes(p.memory_bytes_per_gpu)),
                   QString("%1 B: the largest rank's peak of the LM memory estimate, %2")
                       .arg(exact_bytes(p.memory_bytes_per_gpu),
                            device > 0 ? QString("more than the device's %1 B").arg(exact_bytes(device))
                                       : QString("more than the device holds"))};
      }
      continue;
    }
    row[3] = {QString::fromStdString(sessions::format_ms(static_cast<double>(p.step_time_ns))),
              QString("%1 ns a step (every simulated step is equal)").arg(exact_bytes(p.step_time_ns))};
    fill_rate_cells(row, p.tokens_per_s, p.gpus, p.scaling_efficiency, p.embedding_comm_share, p.comm_share);
    row[4].tooltip = QString("%1 tokens a step").arg(exact_bytes(p.tokens_per_step));
    row[ScalingView::kWireColumn] = {QString::fromStdString(sessions::format_bytes(p.wire_bytes_per_step)),
              QString("%1 B on the wire per step (every rank's bytes sent), %2 B of it Embedscope's split checks")
                  .arg(exact_bytes(p.wire_bytes_per_step), exact_bytes(p.split_check_bytes_per_step))};
    row[ScalingView::kLmTokenBytesColumn] = {QString::number(p.wire_bytes_per_token, 'f', 1),
               QString("(%1 - %2 B of split checks) / %3 tokens = %4 B on the wire per token")
                   .arg(exact_bytes(p.wire_bytes_per_step), exact_bytes(p.split_check_bytes_per_step),
                        exact_bytes(p.tokens_per_step))
                   .arg(p.wire_bytes_per_token, 0, 'f', 2)};
    row[11] = {QString::fromStdString(sessions::format_bytes(p.memory_bytes_per_gpu)),
               QString("%1 B: the largest rank's peak of the LM memory estimate").arg(exact_bytes(p.memory_bytes_per_gpu))};
    row[ScalingView::kLmNoteColumn].text = QString::fromStdString(p.session_path);
  }
  return page;
}

}  // namespace embedscope::ui
