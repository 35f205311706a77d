#include "views/workload_designer.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/sessions/model/units.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QResizeEvent>
#include <QPushButton>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

#include <map>

#include <cmath>
#include <initializer_list>
#include <utility>
#include <fstream>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate

namespace embedscope::ui {

namespace {
using json = nlohmann::json;

// The spellings of enum E (engine/workload/enums.h), in table order, for a combo box.
template <class E>
QStringList choices_of() {
  QStringList out;
  for (const std::string& n : engine::enum_names<E>()) out << QString::fromStdString(n);
  return out;
}

// A combo box for the columns whose values are enumerated (WorkloadModel::ChoicesRole).
class ChoiceDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    const QStringList choices = index.data(WorkloadModel::ChoicesRole).toStringList();
    if (choices.isEmpty()) return QStyledItemDelegate::createEditor(parent, option, index);
    auto* box = new QComboBox(parent);
    box->addItems(choices);
    return box;
  }
  void setEditorData(QWidget* editor, const QModelIndex& index) const override {
    if (auto* box = qobject_cast<QComboBox*>(editor))
      box->setCurrentText(index.data(Qt::EditRole).toString());
    else
      QStyledItemDelegate::setEditorData(editor, index);
  }
  void setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const override {
    if (auto* box = qobject_cast<QComboBox*>(editor))
      model->setData(index, box->currentText());
    else
      QStyledItemDelegate::setModelData(editor, model, index);
  }
};

// A field's red message: word-wrapped, and never shorter than its text wrapped at the width it
// was given, so that the layouts above it grow to show a long message in full (fixc49: one was cut
// at the height its row had before the message came, in the window and in the --screenshot
// image; a wrapped label's height for its width is only a hint that the nested form and box
// layouts did not keep). resizeEvent refits at each new width; set_message after a new text.
class FieldMessage : public QLabel {
 public:
  explicit FieldMessage(QWidget* parent) : QLabel(parent) { setWordWrap(true); }
  /// Shows `text` ("" clears it) and makes room for all of it.
  void set_message(const QString& text) {
    setText(text);
    fit();
  }

 protected:
  void resizeEvent(QResizeEvent* e) override {
    QLabel::resizeEvent(e);
    fit();
  }

 private:
  void fit() {  // only once laid out: a hidden label's width is no width it will have
    if (!isVisible()) return;
    const int h = text().isEmpty() ? 0 : heightForWidth(width());
    if (h != minimumHeight()) setMinimumHeight(h);
  }
};

constexpr int64_t kMiB = int64_t{1} << 20;

QString text_of(const json& v) { return v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString(); }
}  // namespace

WorkloadDesigner::WorkloadDesigner(const QString& preset, QWidget* parent)
    : QWidget(parent), model_(new WorkloadModel(this)) {
  auto* layout = new QVBoxLayout(this);

  // workload source
  auto* source = new QHBoxLayout;
  preset_box_ = new QComboBox(this);
  for (const auto& name : engine::preset_names()) preset_box_->addItem(QString::fromStdString(name));
  auto* open_button = new QPushButton("Open JSON...", this);
  auto* save_button = new QPushButton("Save as JSON...", this);
  source->addWidget(new QLabel("Preset:", this));
  source->addWidget(preset_box_);
  source->addWidget(open_button);
  source->addWidget(save_button);
  source->addStretch(1);
  layout->addLayout(source);
  connect(preset_box_, &QComboBox::activated, this, [this](int) { load_preset(preset_box_->currentText()); });
  connect(open_button, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, "Open workload", {}, "Workloads (*.json);;All files (*)");
    if (!path.isEmpty()) load_file(path);
  });
  connect(save_button, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, "Save workload", QString::fromStdString(model_->value("/name").dump()).remove('"') + ".json",
                                                      "Workloads (*.json)");
    if (path.isEmpty()) return;
    if (const QString err = save(path); !err.isEmpty()) QMessageBox::critical(this, "Cannot save the workload", err);
  });

  // tables
  auto* tables_box = new QGroupBox("Embedding tables (double-click a cell to edit)", this);
  auto* tables_layout = new QVBoxLayout(tables_box);
  table_ = new QTableView(tables_box);
  table_->setModel(model_);
  table_->setItemDelegate(new ChoiceDelegate(table_));
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                          QAbstractItemView::AnyKeyPressed);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 8);  // more rows in view
  tables_layout->addWidget(table_, 1);
  auto* table_buttons = new QHBoxLayout;
  auto* add_button = new QPushButton("Add table", tables_box);
  auto* remove_button = new QPushButton("Remove table", tables_box);
  table_buttons->addWidget(add_button);
  table_buttons->addWidget(remove_button);
  table_buttons->addWidget(add_message("/tables"), 1);
  tables_layout->addLayout(table_buttons);
  connect(add_button, &QPushButton::clicked, this, [this] { table_->selectRow(model_->add_table()); });
  connect(remove_button, &QPushButton::clicked, this, [this] { model_->remove_table(table_->currentIndex().row()); });
  auto* upper = new QHBoxLayout;  // the tables and, beside them, the memory they need
  upper->addWidget(tables_box, 5);
  layout->addLayout(upper, 1);

  // run shape
  auto* lower = new QHBoxLayout;
  auto* form_box = new QGroupBox("Devices and training", this);
  // two columns of fields: in one, its 14 rows held the tables' grid to 2.5 rows at 1280x800
  // while the estimate beside it stood mostly empty (tester60a F8)
  auto* form_columns = new QHBoxLayout(form_box);
  auto* form_left = new QFormLayout;
  auto* form_right = new QFormLayout;
  form_columns->addLayout(form_left, 1);
  form_columns->addLayout(form_right, 1);
  QFormLayout* form = form_left;
  auto spin = [&](int lo, int hi, const QString& suffix = {}) {
    auto* s = new QSpinBox(form_box);
    s->setRange(lo, hi);
    s->setSuffix(suffix);
    s->setKeyboardTracking(false);
    return s;
  };
  auto row = [&](const QString& label, QWidget* w, const QString& field) {
    auto* h = new QHBoxLayout;
    h->addWidget(w);
    h->addWidget(add_message(field), 1);
    form->addRow(label, h);
  };
  devices_ = spin(1, engine::kMaxSimulatedRanks);  // validation says 64 unless the backend is simulated
  memory_mib_ = spin(1, 1 << 30, " MiB");
  batch_ = spin(1, 1 << 24);
  steps_ = spin(1, 1'000'000'000);
  warmup_ = spin(0, 1'000'000'000);
  optimizer_ = new QComboBox(form_box);
  optimizer_->addItems(choices_of<engine::OptimizerType>());
  learning_rate_ = new QDoubleSpinBox(form_box);
  learning_rate_->setDecimals(4);
  learning_rate_->setRange(0.0001, 1000);
  learning_rate_->setKeyboardTracking(false);
  allocator_ = new QComboBox(form_box);
  allocator_->addItems(choices_of<engine::AllocatorKind>());
  backend_ = new QComboBox(form_box);
  backend_->addItems(choices_of<engine::Backend>());
  hardware_ = new QComboBox(form_box);
  for (const auto& n : engine::hardware_profile_names()) hardware_->addItem(QString::fromStdString(n));
  hardware_->setCurrentText("h100_sxm");
  hardware_->setToolTip("backend simulated: the cluster the step programs are timed on (resources/hardware/*.json; "
                        "nodes of the profile's GPUs, memory per device from the profile)");
  pipeline_ = new QComboBox(form_box);
  pipeline_->addItems(choices_of<engine::PipelineKind>());
  pipeline_->setToolTip("TorchRec's training pipelines: base overlaps nothing; sparse_dist sends the next batch's "
                        "ids while this one computes; semi_sync also sends the next batch's embeddings under this "
                        "one's dense part (one step of staleness)");
  // each precision and each link class its own box (tester49 F10: one box showed the forward
  // precision and the links within a node only, and an edit of it rewrote both of each)
  qcomms_ = new QComboBox(form_box);
  qcomms_->addItems(choices_of<engine::CommPrecision>());
  qcomms_->setObjectName("/qcomms/forward_precision");
  qcomms_->setToolTip("precision of the output dist (forward; TorchRec's quantized comms)");
  qcomms_bwd_ = new QComboBox(form_box);
  qcomms_bwd_->addItems(choices_of<engine::CommPrecision>());
  qcomms_bwd_->setObjectName("/qcomms/backward_precision");
  qcomms_bwd_->setToolTip("precision of the gradient dist (backward; TorchRec's quantized comms)");
  // the dense part's GEMM precision (dense.precision, PyTorch AMP's semantics; docs/configuration.md): its own
  // box, its own field, like the comm precisions
  dense_precision_ = new QComboBox(form_box);
  dense_precision_->addItems(choices_of<engine::DensePrecision>());
  dense_precision_->setObjectName("/dense/precision");
  dense_precision_->setToolTip("precision of the dense part's matrix products (PyTorch AMP: GEMM inputs rounded, fp32 "
                               "accumulation and weights); cpu: emulated, simulated: timed at the profile's rate for "
                               "it, cuda: fp32 only");
  for (int k = 0; k < 2; ++k) {
    const std::string link = k == 0 ? "/network/intra_node" : "/network/inter_node";
    auto* bw = new QDoubleSpinBox(form_box);
    bw->setRange(0, 1e9);
    bw->setDecimals(1);
    bw->setSuffix(" MB/s");
    bw->setSpecialValueText("unlimited");
    bw->setKeyboardTracking(false);
    bw->setObjectName(QString::fromStdString(link + "/bandwidth_bytes_per_s"));
    auto* lat = new QDoubleSpinBox(form_box);  // whole ns: 1,500 ns shows 1.500 us, not 1 us
    lat->setRange(0, 1e7);
    lat->setDecimals(3);
    lat->setSuffix(" us");
    lat->setKeyboardTracking(false);
    lat->setObjectName(QString::fromStdString(link + "/latency_ns"));
    (k == 0 ? bandwidth_mbs_ : inter_bandwidth_mbs_) = bw;
    (k == 0 ? latency_us_ : inter_latency_us_) = lat;
  }
  default_sharding_ = new QComboBox(form_box);
  default_sharding_->addItems(choices_of<engine::ShardingType>());
  row("Devices (ranks)", devices_, "/devices/count");
  row("Memory per device", memory_mib_, "/devices/memory_bytes");
  row("Batch size per rank", batch_, "/batch_size");
  row("Measured steps", steps_, "/steps");
  row("Warmup steps", warmup_, "/warmup_steps");
  auto* opt = new QWidget(form_box);
  auto* opt_layout = new QHBoxLayout(opt);
  opt_layout->setContentsMargins(0, 0, 0, 0);
  opt_layout->addWidget(optimizer_);
  opt_layout->addWidget(new QLabel("learning rate", opt));
  opt_layout->addWidget(learning_rate_);
  row("Optimizer", opt, "/optimizer");
  row("Allocator", allocator_, "/memory");
  auto* sharding_row = new QWidget(form_box);
  auto* sharding_layout = new QHBoxLayout(sharding_row);
  sharding_layout->setContentsMargins(0, 0, 0, 0);
  sharding_layout->addWidget(default_sharding_);
  auto_plan_button_ = new QPushButton("Plan automatically", sharding_row);
  auto_plan_button_->setToolTip("search the sharding types and placements for the shortest estimated step that fits "
                                "(TorchRec's planner; `embedscope plan --auto`) and write the plan into the tables' "
                                "sharding and ranks, where you can edit it");
  sharding_layout->addWidget(auto_plan_button_);
  form = form_right;  // sharding, backend, pipeline, precisions, network
  row("Default sharding", sharding_row, "/sharding/default");
  auto* backend_row = new QWidget(form_box);
  auto* backend_layout = new QHBoxLayout(backend_row);
  backend_layout->setContentsMargins(0, 0, 0, 0);
  backend_layout->addWidget(backend_);
  backend_layout->addWidget(new QLabel("hardware (simulated)", backend_row));
  backend_layout->addWidget(hardware_);
  row("Backend", backend_row, "/devices/backend");
  row("Pipeline", pipeline_, "/pipeline");
  auto* prec = new QWidget(form_box);
  auto* prec_layout = new QHBoxLayout(prec);
  prec_layout->setContentsMargins(0, 0, 0, 0);
  prec_layout->addWidget(new QLabel("forward", prec));
  prec_layout->addWidget(qcomms_);
  prec_layout->addWidget(new QLabel("backward", prec));
  prec_layout->addWidget(qcomms_bwd_);
  row("Comm precision", prec, "/qcomms");
  row("Dense precision", dense_precision_, "/dense/precision");
  for (int k = 0; k < 2; ++k) {
    auto* net = new QWidget(form_box);
    auto* net_layout = new QHBoxLayout(net);
    net_layout->setContentsMargins(0, 0, 0, 0);
    net_layout->addWidget(k == 0 ? bandwidth_mbs_ : inter_bandwidth_mbs_);
    net_layout->addWidget(new QLabel("latency", net));
    net_layout->addWidget(k == 0 ? latency_us_ : inter_latency_us_);
    net->setToolTip(k == 0 ? "emulated links between the ranks of one node (unlimited: not emulated)"
                           : "emulated links between nodes (unlimited: not emulated; 1 Gb Ethernet: 125 MB/s, about 50 us)");
    // a message under /network (or /network/intra_node) beside the first row, /network/inter_node's beside the second
    row(k == 0 ? "Network in a node" : "Network across nodes", net, k == 0 ? "/network" : "/network/inter_node");
  }
  auto set_int = [this](QSpinBox* s, const char* field, int64_t unit = 1) {
    connect(s, &QSpinBox::valueChanged, this, [this, field, unit](int v) {
      if (!refreshing_) model_->set_value(field, static_cast<int64_t>(v) * unit);
    });
  };
  // each box named by its field (tests and refresh() find it by the name)
  for (auto [s, field] : std::initializer_list<std::pair<QSpinBox*, const char*>>{{devices_, "/devices/count"}, {memory_mib_, "/devices/memory_bytes"}, {batch_, "/batch_size"},
                          {steps_, "/steps"}, {warmup_, "/warmup_steps"}}) {
    s->setObjectName(field);
    s->setProperty("embedscope_lo", s->minimum());  // its valid range; refresh() widens the box's for a file's value
  }
  set_int(devices_, "/devices/count");
  set_int(memory_mib_, "/devices/memory_bytes", kMiB);
  set_int(batch_, "/batch_size");
  set_int(steps_, "/steps");
  set_int(warmup_, "/warmup_steps");
  auto set_text = [this](QComboBox* c, const char* field) {
    connect(c, &QComboBox::currentTextChanged, this, [this, field](const QString& v) {
      if (!refreshing_) model_->set_value(field, v.toStdString());
    });
  };
  set_text(optimizer_, "/optimizer/type");
  set_text(allocator_, "/memory/allocator");
  set_text(default_sharding_, "/sharding/default");
  set_text(backend_, "/devices/backend");
  // simulated takes a hardware profile (and its device memory); the other backends none
  auto set_hardware = [this] {
    if (refreshing_) return;
    const bool sim = backend_->currentText() == "simulated";
    if (!sim) {
      model_->set_value("/devices/hardware", nullptr);
      return;
    }
    const std::string name = hardware_->currentText().toStdString();
    model_->set_value("/devices/memory_bytes", engine::load_hardware_profile(name).gpu.memory_bytes);
    model_->set_value("/devices/hardware", name);
  };
  connect(backend_, &QComboBox::currentTextChanged, this, set_hardware);
  connect(hardware_, &QComboBox::currentTextChanged, this, set_hardware);
  set_text(pipeline_, "/pipeline");
  set_text(qcomms_, "/qcomms/forward_precision");
  set_text(qcomms_bwd_, "/qcomms/backward_precision");
  set_text(dense_precision_, "/dense/precision");
  for (QDoubleSpinBox* b : {bandwidth_mbs_, latency_us_, inter_bandwidth_mbs_, inter_latency_us_})
    connect(b, &QDoubleSpinBox::valueChanged, this, [this, b] { set_network(b); });
  connect(learning_rate_, &QDoubleSpinBox::valueChanged, this, [this](double v) {
    if (!refreshing_) model_->set_value("/optimizer/learning_rate", v);
  });
  lower->addWidget(form_box, 1);

  auto* memory_box = new QGroupBox("Estimated memory per device (before running)", this);
  auto* memory_layout = new QVBoxLayout(memory_box);
  memory_table_ = new QTableWidget(0, 7, memory_box);
  memory_table_->setHorizontalHeaderLabels({"rank", "weights", "optimizer state", "dense", "buffers", "total", "capacity"});
  memory_table_->verticalHeader()->hide();
  memory_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  memory_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  memory_status_ = new QLabel(memory_box);
  memory_status_->setObjectName("memory_status");
  memory_status_->setWordWrap(true);
  memory_layout->addWidget(memory_status_);
  auto_plan_label_ = new QLabel(memory_box);
  auto_plan_label_->setWordWrap(true);
  auto_plan_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  memory_layout->addWidget(auto_plan_label_);
  memory_layout->addWidget(memory_table_);
  upper->addWidget(memory_box, 3);  // both grids whole at 1280 px
  layout->addLayout(lower, 0);

  other_message_ = new FieldMessage(this);
  other_message_->setStyleSheet("color: #d62728");
  layout->addWidget(other_message_);

  // run
  auto* run_row = new QHBoxLayout;
  session_edit_ = new QLineEdit(this);
  session_edit_->setPlaceholderText("session file (default: embedscope-YYYYmmdd-HHMMSS.db in " + QDir::currentPath() + ")");
  auto* browse = new QPushButton("...", this);
  run_button_ = new QPushButton("Run", this);
  cancel_button_ = new QPushButton("Cancel", this);
  cancel_button_->setEnabled(false);
  progress_ = new QProgressBar(this);
  progress_->setFormat("not started");
  progress_->setValue(0);
  progress_label_ = new QLabel(this);
  run_row->addWidget(new QLabel("Session:", this));
  run_row->addWidget(session_edit_, 2);
  run_row->addWidget(browse);
  run_row->addWidget(run_button_);
  run_row->addWidget(progress_, 2);
  run_row->addWidget(progress_label_, 1);
  run_row->addWidget(cancel_button_);
  layout->addLayout(run_row);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, "Session file", {}, "Sessions (*.db)");
    if (!path.isEmpty()) session_edit_->setText(path);
  });
  connect(run_button_, &QPushButton::clicked, this, [this] {
    if (const QString err = run(session_edit_->text()); !err.isEmpty()) QMessageBox::warning(this, "Cannot run", err);
  });
  connect(cancel_button_, &QPushButton::clicked, this, &WorkloadDesigner::cancel);

  auto_plan_job_ = new AnalysisJob(this);
  connect(auto_plan_button_, &QPushButton::clicked, this, [this] {
    if (const QString err = plan_automatically(); !err.isEmpty()) auto_plan_label_->setText(err);
  });
  connect(model_, &WorkloadModel::validated, this, &WorkloadDesigner::refresh);
  preset_box_->setCurrentText(preset);
  load_preset(preset, true);
}

WorkloadDesigner::~WorkloadDesigner() = default;

QLabel* WorkloadDesigner::add_message(const QString& field) {
  auto* label = new FieldMessage(this);
  label->setStyleSheet("color: #d62728");
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  messages_[field] = label;
  return label;
}

QString WorkloadDesigner::message_at(const QString& field) const {
  const auto it = messages_.find(field);
  return it == messages_.end() ? QString() : it->second->text();
}

QString WorkloadDesigner::load_preset(const QString& name, bool quiet) {
  try {
    model_->load_preset(name.toStdString());
    show_source(name);
    return {};
  } catch (const std::exception& e) {
    show_source(source_);  // the workload shown is still the one loaded before
    if (!quiet) QMessageBox::critical(this, "Cannot load the preset", QString::fromUtf8(e.what()));
    return QString::fromUtf8(e.what());
  }
}

QString WorkloadDesigner::load_file(const QString& path, bool quiet) {
  try {
    model_->load_file(path.toStdString());
    show_source("file " + QFileInfo(path).fileName());
    return {};
  } catch (const std::exception& e) {
    show_source(source_);
    if (!quiet) QMessageBox::critical(this, "Cannot open the workload", QString::fromUtf8(e.what()));
    return QString::fromUtf8(e.what());
  }
}

void WorkloadDesigner::show_source(const QString& source) {
  source_ = source;
  const int i = preset_box_->findText(source);
  preset_box_->setPlaceholderText(i < 0 ? "(" + source + ")" : QString());
  preset_box_->setCurrentIndex(i);  // -1 shows the placeholder: a file, or nothing loaded yet
  preset_box_->setToolTip(i < 0 && !source.isEmpty() ? "the workload came from " + source + ", not a preset"
                                                     : QString("a built-in DLRM preset"));
}

QString WorkloadDesigner::save(const QString& path) {
  std::ofstream out(path.toStdString());
  if (!out) return path + ": cannot write";
  out << model_->workload().dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  return out ? QString() : path + ": write failed";
}

void WorkloadDesigner::set_network(QDoubleSpinBox* edited) {
  if (refreshing_) return;
  // only the field edited (its box is named by its pointer); a link left with no bandwidth and
  // latency 0 is not emulated: its object goes, as the normalized workload leaves it out
  const std::string field = edited->objectName().toStdString();
  const std::string link = field.substr(0, field.rfind('/'));
  const bool bandwidth = field.ends_with("/bandwidth_bytes_per_s");
  const double v = edited->value();
  if (bandwidth)
    model_->set_value(field, v > 0 ? json(std::llround(v * 1e6)) : json());
  else
    model_->set_value(field, std::llround(v * 1e3));
  const json bw = model_->value(link + "/bandwidth_bytes_per_s"), lat = model_->value(link + "/latency_ns");
  if (bw.is_null() && (lat.is_null() || lat == 0)) model_->set_value(link, nullptr);
}

void WorkloadDesigner::refresh() {
  refreshing_ = true;
  // a box shows the workload's value; one it cannot hold (below its minimum, past its maximum,
  // a fraction, not a number: a file's "batch_size": -1) is shown as written, one below the valid
  // minimum, beside the error about it - never clamped to a valid-looking value (tester47 F8)
  auto show_int = [this](QSpinBox* s, const char* p, int64_t unit = 1) {
    const json v = model_->value(p);
    const int lo = s->property("embedscope_lo").toInt();
    const double x = v.is_number() ? v.get<double>() / static_cast<double>(unit) : 0.0;
    // a whole count (devices, steps, ...) must be one; memory_bytes is shown in whole MiB (rounded down)
    const bool whole = unit != 1 || x == std::floor(x);
    const bool shown = v.is_null() || (v.is_number() && whole && x >= lo && x <= s->maximum());
    s->setMinimum(shown ? lo : lo - 1);
    s->setSpecialValueText(shown ? QString() : QString::fromStdString(v.dump()) + (unit == kMiB ? " B" : ""));
    s->setValue(shown ? static_cast<int>(v.is_null() ? lo : std::floor(x)) : lo - 1);
  };
  show_int(devices_, "/devices/count");
  show_int(memory_mib_, "/devices/memory_bytes", kMiB);
  show_int(batch_, "/batch_size");
  show_int(steps_, "/steps");
  show_int(warmup_, "/warmup_steps");
  optimizer_->setCurrentText(text_of(model_->value("/optimizer/type")));
  const json lr = model_->value("/optimizer/learning_rate");
  learning_rate_->setValue(lr.is_number() ? lr.get<double>() : 0.01);
  allocator_->setCurrentText(text_of(model_->value("/memory/allocator")));
  default_sharding_->setCurrentText(text_of(model_->value("/sharding/default")));
  auto text_or = [this](const char* p, const char* fallback) {
    const json v = model_->value(p);
    return v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString(fallback);
  };
  backend_->setCurrentText(text_or("/devices/backend", "cpu"));
  hardware_->setEnabled(backend_->currentText() == "simulated");
  if (model_->value("/devices/hardware").is_string()) hardware_->setCurrentText(text_or("/devices/hardware", "h100_sxm"));
  pipeline_->setCurrentText(text_or("/pipeline", "base"));
  qcomms_->setCurrentText(text_or("/qcomms/forward_precision", "fp32"));
  qcomms_bwd_->setCurrentText(text_or("/qcomms/backward_precision", "fp32"));
  // a workload without a dense part ("dense": null) has no precision to set: an edit would make
  // a dense object of the precision alone
  const json dense = model_->value("/dense");
  dense_precision_->setEnabled(dense.is_object());
  dense_precision_->setCurrentText(text_or("/dense/precision", "fp32"));
  for (QDoubleSpinBox* b : {bandwidth_mbs_, latency_us_, inter_bandwidth_mbs_, inter_latency_us_}) {
    const json v = model_->value(b->objectName().toStdString());
    b->setValue(v.is_number() ? v.get<double>() / (b == bandwidth_mbs_ || b == inter_bandwidth_mbs_ ? 1e6 : 1e3) : 0);
  }
  refreshing_ = false;

  // the message beside the field its pointer names (the longest field that is a prefix)
  for (auto& [field, label] : messages_) static_cast<FieldMessage*>(label)->set_message({});
  static_cast<FieldMessage*>(other_message_)->set_message({});
  // every problem beside its field, not only the first (tester60a F8); two on one field one a line
  std::map<QLabel*, QStringList> said;
  std::vector<QLabel*> order;
  for (const auto& e : model_->errors()) {
    QString pointer = e.pointer;
    if (pointer.startsWith("/features") || pointer.startsWith("/sharding/tables")) pointer = "/tables";
    QLabel* target = other_message_;
    size_t best = 0;
    for (auto& [field, label] : messages_)
      if ((pointer == field || pointer.startsWith(field + "/")) && static_cast<size_t>(field.size()) > best) {
        target = label;
        best = static_cast<size_t>(field.size());
      }
    if (said[target].isEmpty()) order.push_back(target);
    said[target] << e.message;
  }
  for (QLabel* target : order) static_cast<FieldMessage*>(target)->set_message(said[target].join("\n"));
  // the layouts take the message's wrapped height now (the label's row, its group, the designer:
  // a few rounds), not on later passes of the event loop: one pass left it cut at the height it
  // had before, in the window for a moment and in a --screenshot image for good (fixc49)
  for (int i = 0; i < 4; ++i) QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
  if (model_->error_index().isValid()) table_->scrollTo(model_->error_index());

  const auto& mem = model_->memory();
  const int64_t capacity = model_->spec() ? model_->spec()->devices.memory_bytes : 0;
  memory_table_->setRowCount(static_cast<int>(mem.size()));
  for (size_t i = 0; i < mem.size(); ++i) {
    const auto& e = mem[i];
    const int64_t values[] = {e.weights, e.optimizer_state, e.dense, e.buffers, e.total(), capacity};
    auto* rank = new QTableWidgetItem(QString::number(e.rank));
    memory_table_->setItem(static_cast<int>(i), 0, rank);
    for (int c = 0; c < 6; ++c) {
      auto* item = new QTableWidgetItem(QString::fromStdString(sessions::format_bytes(values[c])));
      item->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(values[c]));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (c == 4 && e.total() > capacity) {
        item->setBackground(QColor(0xff, 0x9e, 0x9e));
        item->setForeground(Qt::black);
        item->setToolTip("does not fit the device");
      }
      memory_table_->setItem(static_cast<int>(i), c + 1, item);
    }
  }
  if (mem.empty()) {
    memory_status_->setText("No estimate until the workload is valid.");
  } else {
    int64_t most = 0, reserved = 0;  // reserved: the most an allocator that runs out at capacity reserves
    for (const auto& e : mem) {
      most = std::max(most, e.total());
      if (e.shortfall_request > 0) reserved = std::max(reserved, e.peak_reserved);
    }
    // the bytes fit, the allocator's segments do not (retest48 F-B: the pane said 91.9 % and nothing
    // more, while the plan is refused because the caching allocator reserves 50 MiB)
    const QString verdict = most > capacity ? QString(": it does not fit")
                            : reserved > 0  ? QString(", but its allocator reserves %1 for the run's buffers: it does not fit")
                                                 .arg(QString::fromStdString(sessions::format_bytes(reserved)))
                                            : QString();
    memory_status_->setText(QString("The fullest device needs %1 of %2 (%3 %)%4.")
                                .arg(QString::fromStdString(sessions::format_bytes(most)))
                                .arg(QString::fromStdString(sessions::format_bytes(capacity)))
                                .arg(capacity > 0 ? 100.0 * static_cast<double>(most) / static_cast<double>(capacity) : 0.0, 0, 'f', 1)
                                .arg(verdict));
  }
  run_button_->setEnabled(model_->error().isEmpty() && !job_);
}

namespace {
// A searched plan and the greedy plan's statistics, for the designer's comparison.
struct AutoPlan {
  engine::PlanSearchResult search;
  engine::PlanStats greedy;
  std::string hardware;
};
}  // namespace

QString WorkloadDesigner::plan_automatically() {
  if (!model_->error().isEmpty() || !model_->spec()) return "the workload cannot be planned: " + model_->error();
  auto_plan_button_->setEnabled(false);
  auto_plan_label_->setText("searching for a plan...");
  const engine::WorkloadSpec spec = *model_->spec();
  auto_plan_job_->start<AutoPlan>(
      [spec] {
        const engine::HardwareProfile hw = engine::planning_profile(spec);
        return AutoPlan{engine::plan_search(spec, hw), engine::plan_stats(spec, engine::plan_sharding(spec), hw), hw.name};
      },
      [this, spec](AutoPlan& r) {
        auto_plan_button_->setEnabled(true);
        // the plan as the tables' overrides (every table gets one), which revalidates the model
        json tables = json::object();
        for (const auto& [name, ts] : engine::plan_overrides(spec, r.search.plan)) {
          json e{{"type", engine::to_string(ts.type)}};
          if (!ts.ranks.empty()) e["ranks"] = ts.ranks;
          if (ts.node >= 0) e["node"] = ts.node;
          tables[name] = std::move(e);
        }
        model_->set_value("/sharding/tables", std::move(tables));
        // what the spec cannot pin (grid_shard blocks, table_column_wise ranks inside the node)
        // plan_sharding places again: say how many tables differ from the search's plan
        int differ = 0;
        if (model_->spec() && model_->error().isEmpty()) {
          const engine::ShardingPlan now = engine::plan_sharding(*model_->spec());
          for (size_t t = 0; t < now.tables.size() && t < r.search.plan.tables.size(); ++t) {
            const auto& a = now.tables[t].shards;
            const auto& b = r.search.plan.tables[t].shards;
            bool same = a.size() == b.size();
            for (size_t k = 0; same && k < a.size(); ++k)
              same = a[k].rank == b[k].rank && a[k].row_offset == b[k].row_offset && a[k].col_offset == b[k].col_offset;
            differ += same ? 0 : 1;
          }
        }
        int64_t hbm = 0;
        for (const auto& rk : r.search.stats.ranks) hbm = std::max(hbm, rk.hbm_bytes);
        auto_plan_label_->setText(
            QString("Planned automatically on %1 (proposer %2, %3 proposals): estimated step %4 ms vs %5 ms for the "
                    "greedy plan; lookups max/mean %6 vs %7; the fullest device %8. Written into the tables' sharding "
                    "and ranks%9.")
                .arg(QString::fromStdString(r.hardware), QString::fromStdString(r.search.proposer))
                .arg(r.search.proposals)
                .arg(static_cast<double>(r.search.stats.critical_path_ns) / 1e6, 0, 'f', 3)
                .arg(static_cast<double>(r.greedy.critical_path_ns) / 1e6, 0, 'f', 3)
                .arg(r.search.stats.lookups.max_over_mean, 0, 'f', 2)
                .arg(r.greedy.lookups.max_over_mean, 0, 'f', 2)
                .arg(QString::fromStdString(sessions::format_bytes(hbm)))
                .arg(differ > 0 ? QString("; %1 table(s) are placed again by the greedy rule within what the workload "
                                          "can say (grid_shard blocks, table_column_wise ranks)")
                                      .arg(differ)
                                : QString()));
      },
      [this](const QString& error) {
        auto_plan_button_->setEnabled(true);
        auto_plan_label_->setText("No plan: " + error);
      });
  return {};
}

QString WorkloadDesigner::auto_plan_text() const { return auto_plan_label_->text(); }

QString WorkloadDesigner::run(const QString& session_path) {
  if (job_) return "a run is going; cancel it or wait for it to end";
  if (!model_->error().isEmpty() || !model_->spec()) return "the workload cannot run: " + model_->error();
  const QString path = session_path.isEmpty()
                           ? QDir::current().filePath("embedscope-" + QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss") + ".db")
                           : session_path;
  job_ = std::make_unique<RunJob>(*model_->spec(), path);
  connect(job_.get(), &RunJob::progress, this, [this](qint64 step, qint64 steps, double sps, double eta) {
    progress_->setMaximum(static_cast<int>(std::min<qint64>(steps, INT_MAX)));
    progress_->setValue(static_cast<int>(std::min<qint64>(step, INT_MAX)));
    progress_label_->setText(step == 0 ? QString("warmup")
                                       : QString("%1 samples/s, ETA %2").arg(QString::fromStdString(sessions::format_rate(sps))).arg(format_eta(eta)));
  });
  connect(job_.get(), &RunJob::finished, this, &WorkloadDesigner::on_finished);
  progress_->setMaximum(static_cast<int>(std::min<int64_t>(model_->spec()->steps, INT_MAX)));
  progress_->setValue(0);
  progress_->setFormat("step %v / %m");
  progress_label_->setText("starting");
  run_button_->setEnabled(false);
  cancel_button_->setEnabled(true);
  job_->start();
  return {};
}

void WorkloadDesigner::cancel() {
  if (!job_) return;
  job_->cancel();
  cancel_button_->setEnabled(false);
  progress_label_->setText("cancelling after this step");
}

QString WorkloadDesigner::progress_text() const { return progress_->text() + "  " + progress_label_->text(); }

void WorkloadDesigner::on_finished(const QString& path, const QString& ended, const QString& message) {
  job_.release()->deleteLater();  // its thread is done; this slot runs inside its signal
  cancel_button_->setEnabled(false);
  run_button_->setEnabled(model_->error().isEmpty());
  // a run that left no session says so (RunJob::finished), DLRM and lm_embedding runs alike
  progress_label_->setText(path.isEmpty() && ended != "error" ? ended + ": " + kNoSessionWritten : ended);
  if (ended != "complete" && ended != "cancelled") {
    auto* box = new QMessageBox(QMessageBox::Critical, "The run ended " + ended,
                                message.isEmpty() ? "The run ended " + ended : message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // not modal to the application: the workbench keeps working
  }
  if (!path.isEmpty()) emit session_written(path, ended);
}

bool is_workload_file(const QString& path) {
  const QFileInfo info(path);
  if (!info.isFile() || info.size() > (16 << 20)) return false;
  std::ifstream in(path.toStdString(), std::ios::binary);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.contains("runs") || j.contains("traceEvents")) return false;
  if (j.value("model", json()) == "lm_embedding") return true;
  // "tables" alone makes a workload: a hand-written first draft lacks batch_size or has a wrong
  // key, and the designer shows the engine's error for it (tester56 F15: it went to the importers)
  const auto tables = j.find("tables");
  if (tables == j.end() || !tables->is_array()) return false;
  return tables->empty() || !tables->front().is_object() || !tables->front().contains("sharding_type");
}

QString broken_workload_json_error(const QString& path) {
  const QFileInfo info(path);
  if (!info.isFile() || info.size() > (16 << 20)) return {};
  std::ifstream in(path.toStdString(), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // a JSON object's text only: a session (SQLite), a pickle or a gzip holds a workload's keys too
  // (a session stores its workload JSON), and is not a broken workload (retest47 R10)
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return {};
  if (!json::accept(text)) {
    const bool workload_keys = text.find("\"tables\"") != std::string::npos ||
                               text.find("\"batch_size\"") != std::string::npos ||
                               text.find("\"vocab_size\"") != std::string::npos;
    if (!workload_keys || text.find("\"traceEvents\"") != std::string::npos) return {};
    try {
      engine::load_workload_file(path.toStdString());  // throws run's SpecError: file, line, column
    } catch (const std::exception& e) {
      std::string msg = e.what();
      const std::string prefix = path.toStdString() + ": ";
      if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
      return path + ": a workload JSON? " + QString::fromStdString(msg);
    }
  }
  return {};
}

}  // namespace embedscope::ui
