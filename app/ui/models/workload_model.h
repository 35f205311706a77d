#pragma once
// The workload being designed: a workload JSON document (docs/configuration.md)
// edited through a table of its embedding tables, validated by the engine after every edit
// (engine::parse_workload, plan_sharding, estimate_memory, check_memory_fits), with the
// offending cell of a validation error and the estimated memory of every device.

#include <QAbstractTableModel>
#include <QStringList>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::ui {

class WorkloadModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  /// One row per entry of /tables. Pooling factor and ids are those of the table's features
  /// (/features entries named by its feature_names; an edit sets every one of them); sharding
  /// type and ranks are the table's /sharding/tables/NAME override ("default" = none).
  enum Column { Name, NumEmbeddings, EmbeddingDim, Pooling, PoolingFactor, Ids, Sharding, Ranks, ColumnCount };
  /// Qt::UserRole + 1: the accepted values of an enumerated column (QStringList), for a combo box.
  static constexpr int ChoicesRole = Qt::UserRole + 1;

  explicit WorkloadModel(QObject* parent = nullptr);

  /// Replaces the document (a workload JSON object with a "tables" array of objects; other
  /// shapes throw engine::SpecError) and validates it.
  void set_workload(nlohmann::json doc);
  /// A built-in preset, normalized (every default written out). Throws engine::SpecError, for
  /// an lm_embedding preset (engine::is_lm_preset) "preset \"NAME\" is an lm_embedding workload:
  /// the designer edits DLRM (embedding-bag) workloads only; run it with `embedscope run --preset
  /// NAME` ...".
  void load_preset(const std::string& name);
  /// A workload file: normalized when valid; kept as written when it is JSON with a "tables"
  /// array but fails validation (the error then shows in the designer), with the defaults the
  /// normalized form would add where the file leaves a key out (devices.memory_bytes 8 GiB, ...;
  /// tables and features entry by entry), taken from the workload without the keys the engine
  /// refuses - none where that workload is not valid either (a required key missing, a table
  /// entry that is no object). Throws engine::SpecError
  /// (naming the file) for a file that cannot be read or is not such JSON, and "PATH: an
  /// lm_embedding workload (\"model\": \"lm_embedding\"): the designer edits DLRM (embedding-bag)
  /// workloads only; ..." for an lm_embedding workload.
  void load_file(const std::string& path);
  const nlohmann::json& workload() const { return doc_; }

  /// The value at a JSON pointer ("/batch_size"), or null when absent.
  nlohmann::json value(const std::string& pointer) const;
  /// Sets the value at a JSON pointer (creating objects on the way) and re-validates; null
  /// removes the key (an optional field left out).
  void set_value(const std::string& pointer, nlohmann::json v);

  /// Appends a table (1000 x the last table's dim, one feature "f_NAME" of pooling factor 1,
  /// uniform ids); returns its row.
  int add_table();
  /// Removes a table, its features and its sharding override.
  void remove_table(int row);

  /// The first problem the engine finds, as "<JSON pointer>: <reason>"
  /// ("/tables/0/embedding_dim: must be > 0, got 0"); empty when the workload can run.
  const QString& error() const { return error_; }
  /// The JSON pointer of error() ("/tables/0/embedding_dim"), or empty.
  const QString& error_pointer() const { return error_pointer_; }
  /// The cell error_pointer() names (a /tables, /features or /sharding/tables entry), or an
  /// invalid index when it names something outside the table.
  QModelIndex error_index() const { return error_index_; }
  /// One problem of the workload: its pointer, message and cell (invalid outside the table).
  struct FieldError {
    QString pointer, message;
    QModelIndex index;
  };
  /// Every problem the validator finds (core/workload_errors.h), the first being error(); just
  /// error() where that is the planner's or the memory check's; empty when the workload can run.
  /// Each cell named is red, with its own message as tooltip.
  const std::vector<FieldError>& errors() const { return errors_; }
  /// The parsed spec, once the document passes parse_workload.
  const std::optional<engine::WorkloadSpec>& spec() const { return spec_; }
  /// Estimated bytes per device under the planned sharding (engine::estimate_memory), also
  /// when they do not fit; empty when the spec or plan is invalid.
  const std::vector<engine::DeviceMemoryEstimate>& memory() const { return memory_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole/EditRole: the cell as text (Ranks without an override shows the planner's
  /// choice, "auto: 0, 1", in grey - for a refused workload that of the workload without the keys
  /// the engine refuses, where it has one; its EditRole is then empty); BackgroundRole: red on the
  /// error cell; ToolTipRole: the error on that cell; ChoicesRole: values of Pooling and Sharding.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  /// Stores the edit in the document as typed (an integer where the text is one, else the
  /// text), so the engine's validator judges it; returns false only for a bad index or role.
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 signals:
  /// After every change of the document, once validated.
  void validated();

 private:
  void revalidate();
  void edit(const QModelIndex& index, const QString& text);  // may throw nlohmann::json::exception
  nlohmann::json* table(int row);
  const nlohmann::json* table(int row) const;
  std::vector<nlohmann::json*> features_of(int row);
  std::vector<const nlohmann::json*> features_of(int row) const;
  const nlohmann::json* sharding_of(int row) const;
  int row_of_table_name(const std::string& name) const;
  int row_of_feature(size_t feature_index) const;
  std::string value_or_default_type() const;
  QModelIndex index_of_pointer(const QString& pointer) const;  // the cell a pointer names, or invalid

  nlohmann::json doc_ = nlohmann::json::object();
  QString error_, error_pointer_;
  QModelIndex error_index_;
  std::vector<FieldError> errors_;
  std::optional<engine::WorkloadSpec> spec_;
  std::vector<engine::DeviceMemoryEstimate> memory_;
  std::optional<engine::ShardingPlan> plan_;
};

}  // namespace embedscope::ui
