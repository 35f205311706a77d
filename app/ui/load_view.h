#pragma once
// The load view: heatmaps (QCPColorMap) of a load metric per rank x table shard and per
// rank x step with a colour scale and hover values, the imbalance (max / mean) of each step,
// and a bar per rank.

#include <QWidget>

#include <memory>

#include "embedscope/sessions/session.h"
#include "load_data.h"

class QCustomPlot;
class QComboBox;

namespace embedscope::ui {

class LoadView : public QWidget {
  Q_OBJECT

 public:
  explicit LoadView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  void set_metric(LoadMetric m);
  const LoadData& data() const { return data_; }
  QCustomPlot* shard_map() { return shard_plot_; }

 private:
  void rebuild();
  std::shared_ptr<const sessions::SessionReader> session_;
  LoadMetric metric_ = LoadMetric::ids_looked_up;
  LoadData data_;
  QComboBox* metric_box_;
  QCustomPlot *shard_plot_, *step_plot_, *imbalance_plot_, *rank_plot_;
};

}  // namespace embedscope::ui
