#include "models/workload_model.h"

#include "embedscope/engine/workload/lm_spec.h"

#include <QBrush>
#include <QColor>
#include <QRegularExpression>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "core/workload_errors.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/workload/presets.h"

namespace embedscope::ui {

namespace {
using json = nlohmann::json;

/// The origin the designer gives the validator; stripped from the messages it shows.
constexpr const char* kOrigin = "workload";

// The spellings of enum E (engine/workload/enums.h), in table order, after `first`.
template <class E>
QStringList choices_of(QStringList first = {}) {
  for (const std::string& n : engine::enum_names<E>()) first << QString::fromStdString(n);
  return first;
}
const QStringList kPoolings = choices_of<engine::Pooling>();
const QStringList kShardingChoices = choices_of<engine::ShardingType>({"default"});

// RFC 6901 tokens of a pointer, unescaped.
std::vector<std::string> tokens_of(const std::string& pointer) {
  std::vector<std::string> out;
  if (pointer.empty() || pointer[0] != '/') return out;
  std::string cur;
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      out.push_back(cur);
      cur.clear();
    } else if (pointer[i] == '~' && i + 1 < pointer.size()) {
      cur += pointer[++i] == '1' ? '/' : '~';
    } else {
      cur += pointer[i];
    }
  }
  return out;
}

QString number_text(double v) { return QString::number(v, 'g', 10); }

// A cell's text as JSON: an integer where it is one, else the text itself (the validator names it).
json typed(const QString& text) {
  bool ok = false;
  const qlonglong v = text.trimmed().toLongLong(&ok);
  return ok ? json(static_cast<int64_t>(v)) : json(text.toStdString());
}

QString pooling_factor_text(const json& pf) {
  if (pf.is_object())
    return QString("mean %1, max %2").arg(number_text(pf.value("mean", 0.0))).arg(pf.value("max", json(0)).dump().c_str());
  return QString::fromStdString(pf.is_string() ? pf.get<std::string>() : pf.dump());
}

// "2" -> 2 (fixed); "mean 3, max 6" or "3 max 6" -> {"mean": 3, "max": 6}; anything else as typed.
json parse_pooling_factor(const QString& text) {
  static const QRegularExpression re(R"(^\s*(?:mean\s*)?([0-9.eE+]+)\s*(?:,?\s*max\s*([0-9]+))?\s*$)");
  const auto m = re.match(text);
  bool ok = false;
  const double mean = m.hasMatch() ? m.captured(1).toDouble(&ok) : 0.0;
  if (!ok) return text.toStdString();
  const json mean_json = mean == static_cast<double>(static_cast<int64_t>(mean)) ? json(static_cast<int64_t>(mean)) : json(mean);
  if (m.captured(2).isEmpty()) return mean_json;
  return json{{"mean", mean_json}, {"max", m.captured(2).toLongLong()}};
}

QString ids_text(const json& ids) {
  if (ids.is_string()) return QString::fromStdString(ids.get<std::string>());
  if (!ids.is_object()) return QString::fromStdString(ids.dump());
  const std::string kind = ids.value("distribution", std::string("uniform"));
  if (kind != "zipf") return QString::fromStdString(kind);
  return QString("zipf %1").arg(number_text(ids.value("alpha", 1.15)));
}

// "uniform", "zipf" or "zipf ALPHA" into the feature's ids object; anything else as typed.
json parse_ids(const QString& text, json ids) {
  const QStringList parts = text.simplified().split(' ', Qt::SkipEmptyParts);
  if (!ids.is_object()) ids = ids.is_string() ? json{{"distribution", ids}} : json::object();
  bool ok = parts.size() == 1;
  double alpha = 0;
  if (parts.size() == 2) alpha = parts[1].toDouble(&ok);
  if (!ok || (parts[0] != "uniform" && parts[0] != "zipf") || (parts[0] == "uniform" && parts.size() == 2))
    return text.toStdString();
  ids["distribution"] = parts[0].toStdString();
  if (parts.size() == 2) ids["alpha"] = alpha;
  return ids;
}

// The JSON pointer a refusal names: "<origin>: <pointer>: <reason>" from the validator,
// "<pointer>: <reason>" from the planner; "" when it names none.
std::string refused_pointer(const std::exception& e) {
  std::string msg = e.what();
  const std::string prefix = std::string(kOrigin) + ": ";
  if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
  if (msg.empty() || msg[0] != '/') return {};
  const size_t end = msg.find(": ");
  return end == std::string::npos ? msg : msg.substr(0, end);
}

// Whether taking `pointer` out of a document keeps its table and feature rows: not "", not
// /tables or /features themselves, not one of their entries (a key of an entry may go).
bool keeps_rows(const std::string& pointer) {
  const auto t = tokens_of(pointer);
  if (t.empty()) return false;
  if (t[0] == "tables" || t[0] == "features") return t.size() >= 3;
  return true;
}

// A refused document with each key the engine refuses taken out, one refusal at a time (at most
// 32): the workload it is without them, parsed and planned (tester53 F9: the defaults and the
// planner's ranks a file with "bogus": 1 would show once the key goes). nullopt when a refusal
// names nothing the document has (a required key, a bad value's parent) or would drop a row.
struct Repaired {
  engine::WorkloadSpec spec;
  engine::ShardingPlan plan;
};
std::optional<Repaired> without_refused_keys(json doc) {
  std::vector<std::string> erased;
  for (int round = 0; round < 32; ++round) {
    try {
      Repaired r{engine::parse_workload(doc, kOrigin), {}};
      r.plan = engine::plan_sharding(r.spec);
      return r;
    } catch (const std::exception& e) {
      const std::string pointer = refused_pointer(e);
      if (!keeps_rows(pointer)) return std::nullopt;
      const json::json_pointer p(pointer);
      if (!doc.contains(p)) {
        // a required key refused for its value ("batch_size": -1), taken out above: the tiny
        // preset's value stands in, so the other keys' defaults still show (tester63a F16: a bad
        // batch_size read "Memory per device 1 MiB", the box's minimum, and no planned ranks)
        if (std::find(erased.begin(), erased.end(), pointer) == erased.end()) return std::nullopt;
        static const json stand_in = engine::to_json(engine::load_preset("tiny"));
        if (!stand_in.contains(p)) return std::nullopt;
        doc[p] = stand_in.at(p);
        continue;
      }
      erased.push_back(pointer);
      json& parent = doc[p.parent_pointer()];
      if (parent.is_object()) {
        parent.erase(p.back());
      } else if (parent.is_array()) {
        parent.erase(static_cast<size_t>(std::strtoull(p.back().c_str(), nullptr, 10)));
      } else {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

// Adds to `doc` what `defaults` has and it lacks: an object's missing keys, recursively; an array
// of named objects (tables, features) entry by entry where the names agree, and the entries
// `defaults` appends (features the tables name but the document does not list) when every entry
// agreed. What the document has is kept as written.
void fill_missing(json& doc, const json& defaults) {
  if (doc.is_object() && defaults.is_object()) {
    for (const auto& [key, value] : defaults.items()) {
      if (!doc.contains(key)) doc[key] = value;
      else fill_missing(doc[key], value);
    }
    return;
  }
  if (!doc.is_array() || !defaults.is_array() || defaults.size() < doc.size()) return;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& d = defaults[i];
    if (!doc[i].is_object() || !d.is_object() || !doc[i].contains("name") || d.value("name", json()) != doc[i]["name"])
      return;
  }
  for (size_t i = 0; i < defaults.size(); ++i) {
    if (i < doc.size()) fill_missing(doc[i], defaults[i]);
    else doc.push_back(defaults[i]);
  }
}
}  // namespace

WorkloadModel::WorkloadModel(QObject* parent) : QAbstractTableModel(parent) {}

void WorkloadModel::set_workload(json doc) {
  if (!doc.is_object() || !doc.contains("tables") || !doc["tables"].is_array())
    throw engine::SpecError(std::string(kOrigin) + ": /tables: the designer needs a workload object with a \"tables\" array");
  for (size_t i = 0; i < doc["tables"].size(); ++i)
    if (!doc["tables"][i].is_object())
      throw engine::SpecError(std::string(kOrigin) + ": /tables/" + std::to_string(i) + ": must be an object");
  beginResetModel();
  doc_ = std::move(doc);
  endResetModel();
  revalidate();
}

void WorkloadModel::load_preset(const std::string& name) {
  if (engine::is_lm_preset(name))  // tester43 F23: not "unknown preset" with its name in the list
    throw engine::SpecError("preset \"" + name + "\" is an lm_embedding workload: the designer edits DLRM (embedding-bag) "
                            "workloads only; run it with `embedscope run --preset " + name +
                            "` (or --simulate h100_sxm), or compare its modes in a teaching scenario");
  set_workload(engine::to_json(engine::load_preset(name)));
}

void WorkloadModel::load_file(const std::string& path) {
  bool lm = false;
  try {
    lm = engine::is_lm_workload_file(path);
  } catch (const engine::SpecError&) {  // unreadable or not JSON: load_workload_file below says why
  }
  if (lm)  // tester43 F23: its valid keys are not "unknown keys" of a DLRM workload
    throw engine::SpecError(path + ": an lm_embedding workload (\"model\": \"lm_embedding\"): the designer edits DLRM "
                            "(embedding-bag) workloads only; run it with `embedscope run " + path +
                            "` (or --simulate h100_sxm), or compare its modes in a teaching scenario");
  try {
    set_workload(engine::to_json(engine::load_workload_file(path)));
  } catch (const engine::SpecError& e) {
    // Not valid: open it as written when it is a workload-shaped JSON object, to be fixed here.
    std::ifstream in(path);
    json doc = json::parse(in, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("tables") || !doc["tables"].is_array()) throw;
    if (!doc.contains("name")) doc["name"] = std::filesystem::path(path).stem().string();
    // the defaults a valid file is given (its normalized form), where the file leaves them out and
    // the workload without its refused keys has them: fixing the error keeps them (tester53 F9:
    // no devices.memory_bytes read "1 MiB", the box's minimum, where a valid file reads 8 GiB)
    if (const auto repaired = without_refused_keys(doc)) {
      json filled = engine::to_json(repaired->spec);
      // a simulated device's memory is its hardware profile's, as load_workload_file gives the valid
      // file (tester63a F16: 81559 MiB for h100_sxm, not the 8 GiB of a cpu device)
      const auto& dev = repaired->spec.devices;
      if (dev.backend == engine::Backend::simulated && !dev.hardware.empty() && doc.contains("devices") &&
          doc["devices"].is_object() && !doc["devices"].contains("memory_bytes"))
        try {
          filled["devices"]["memory_bytes"] = engine::load_hardware_profile(dev.hardware).gpu.memory_bytes;
        } catch (const engine::SpecError&) {  // the checks name a profile that does not load
        }
      fill_missing(doc, filled);
    }
    set_workload(std::move(doc));
  }
}

json WorkloadModel::value(const std::string& pointer) const {
  const json::json_pointer p(pointer);
  return doc_.contains(p) ? doc_.at(p) : json();
}

void WorkloadModel::set_value(const std::string& pointer, json v) {
  const json::json_pointer p(pointer);
  if (v.is_null()) {
    if (doc_.contains(p)) doc_[p.parent_pointer()].erase(p.back());
  } else {
    doc_[p] = std::move(v);
  }
  revalidate();
}

int WorkloadModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || !doc_.contains("tables")) return 0;
  return static_cast<int>(doc_["tables"].size());
}

json* WorkloadModel::table(int row) { return &doc_["tables"][static_cast<size_t>(row)]; }
const json* WorkloadModel::table(int row) const { return &doc_["tables"][static_cast<size_t>(row)]; }

std::vector<const json*> WorkloadModel::features_of(int row) const {
  std::vector<const json*> out;
  const json& names = table(row)->value("feature_names", json::array());
  if (!names.is_array() || !doc_.contains("features") || !doc_["features"].is_array()) return out;
  for (const auto& n : names)
    for (const auto& f : doc_["features"])
      if (f.is_object() && f.contains("name") && f["name"] == n) out.push_back(&f);
  return out;
}

std::vector<json*> WorkloadModel::features_of(int row) {
  // a feature a table names but /features does not list is created with the defaults
  std::vector<json*> out;
  json names = table(row)->value("feature_names", json::array());
  if (!names.is_array()) return out;
  if (!doc_.contains("features") || !doc_["features"].is_array()) doc_["features"] = json::array();
  for (const auto& n : names) {
    json* found = nullptr;
    for (auto& f : doc_["features"])
      if (f.is_object() && f.contains("name") && f["name"] == n) found = &f;
    if (!found) {
      doc_["features"].push_back({{"name", n}, {"pooling_factor", 1}, {"ids", "uniform"}});
      found = &doc_["features"].back();
    }
    out.push_back(found);
  }
  return out;
}

const json* WorkloadModel::sharding_of(int row) const {
  const json::json_pointer p("/sharding/tables");
  if (!doc_.contains(p) || !doc_.at(p).is_object()) return nullptr;
  const json& name = table(row)->value("name", json());
  if (!name.is_string()) return nullptr;
  const auto it = doc_.at(p).find(name.get<std::string>());
  return it != doc_.at(p).end() && it->is_object() ? &*it : nullptr;
}

int WorkloadModel::row_of_table_name(const std::string& name) const {
  for (int r = 0; r < rowCount(); ++r)
    if (table(r)->value("name", json()) == name) return r;
  return -1;
}

int WorkloadModel::row_of_feature(size_t k) const {
  if (!doc_.contains("features") || k >= doc_["features"].size()) return -1;
  const json& name = doc_["features"][k].value("name", json());
  for (int r = 0; r < rowCount(); ++r) {
    const json& names = table(r)->value("feature_names", json::array());
    if (names.is_array() && std::find(names.begin(), names.end(), name) != names.end()) return r;
  }
  return -1;
}

QModelIndex WorkloadModel::index_of_pointer(const QString& pointer) const {
  const auto t = tokens_of(pointer.toStdString());
  auto index_of = [&](size_t k) -> size_t { return static_cast<size_t>(std::strtoull(t[k].c_str(), nullptr, 10)); };
  int row = -1, col = Name;
  if (t.size() >= 2 && t[0] == "tables") {
    row = static_cast<int>(index_of(1));
    const std::string field = t.size() > 2 ? t[2] : "";
    col = field == "num_embeddings" ? NumEmbeddings : field == "embedding_dim" ? EmbeddingDim
        : field == "pooling"        ? Pooling       : Name;
  } else if (t.size() >= 2 && t[0] == "features") {
    row = row_of_feature(index_of(1));
    const std::string field = t.size() > 2 ? t[2] : "";
    col = field == "pooling_factor" ? PoolingFactor : field == "ids" ? Ids : Name;
  } else if (t.size() >= 3 && t[0] == "sharding" && t[1] == "tables") {
    row = row_of_table_name(t[2]);
    col = t.size() > 3 && (t[3] == "ranks" || t[3] == "node") ? Ranks : Sharding;
  }
  return row >= 0 && row < rowCount() ? index(row, col) : QModelIndex();
}

void WorkloadModel::revalidate() {
  error_.clear();
  error_pointer_.clear();
  error_index_ = {};
  errors_.clear();
  spec_.reset();
  memory_.clear();
  plan_.reset();
  try {
    spec_ = engine::parse_workload(doc_, kOrigin);
    plan_ = engine::plan_sharding(*spec_);
    memory_ = engine::estimate_memory(*spec_, *plan_);
    engine::check_memory_fits(*spec_, memory_);
  } catch (const std::exception& e) {
    // the planner's ranks (the grey "auto: ..." cells) of the workload without the keys the engine
    // refuses, where taking them out keeps every row (tester53 F9: "bogus": 1 emptied the column)
    if (!plan_)
      if (auto repaired = without_refused_keys(doc_)) plan_ = std::move(repaired->plan);
    // "<origin>: <pointer>: <reason>" from the validator, "<pointer>: <reason>" from the planner
    QString msg = QString::fromUtf8(e.what());
    const QString prefix = QString(kOrigin) + ": ";
    if (msg.startsWith(prefix)) msg = msg.mid(prefix.size());
    error_ = msg;
    if (msg.startsWith('/')) error_pointer_ = msg.left(msg.indexOf(": "));
    error_index_ = index_of_pointer(error_pointer_);
    errors_.push_back({error_pointer_, error_, error_index_});
    // the validator's further problems, each beside its field (tester60a F8)
    if (!spec_)
      for (const auto& more : every_workload_error(doc_, kOrigin))
        if (QString::fromStdString(more.pointer) != error_pointer_) {
          const QString pointer = QString::fromStdString(more.pointer);
          errors_.push_back({pointer, QString::fromStdString(more.message), index_of_pointer(pointer)});
        }
  }
  if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
  emit validated();
}

QVariant WorkloadModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const FieldError* cell_error = nullptr;  // the first problem naming this cell
  for (const auto& e : errors_)
    if (e.index == index) {
      cell_error = &e;
      break;
    }
  const bool is_error = cell_error != nullptr;
  if (role == Qt::BackgroundRole) return is_error ? QVariant(QBrush(QColor(0xff, 0x9e, 0x9e))) : QVariant();
  const bool planned_ranks = index.column() == Ranks && !(sharding_of(index.row()) && sharding_of(index.row())->contains("ranks"));
  if (role == Qt::ForegroundRole)  // black is readable on red; the planner's choice is grey
    return is_error ? QVariant(QBrush(Qt::black)) : planned_ranks ? QVariant(QBrush(QColor(0x80, 0x80, 0x80))) : QVariant();
  if (role == Qt::TextAlignmentRole && (index.column() == NumEmbeddings || index.column() == EmbeddingDim))
    return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole) return is_error ? QVariant(cell_error->message) : QVariant();
  if (role == ChoicesRole) {
    if (index.column() == Pooling) return kPoolings;
    if (index.column() == Sharding) return kShardingChoices;
    return {};
  }
  if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
  const json& t = *table(index.row());
  auto field = [&](const char* key) -> QString {
    if (!t.contains(key)) return {};
    return QString::fromStdString(t[key].is_string() ? t[key].get<std::string>() : t[key].dump());
  };
  // the features' value when they agree, else each one's
  auto per_feature = [&](auto text_of) {
    QStringList values;
    for (const json* f : features_of(index.row())) values << text_of(*f);
    values.removeDuplicates();
    return values.isEmpty() ? text_of(json::object()) : values.join("; ");
  };
  const json* sh = sharding_of(index.row());
  switch (index.column()) {
    case Name: return field("name");
    case NumEmbeddings: return field("num_embeddings");
    case EmbeddingDim: return field("embedding_dim");
    case Pooling: return t.contains("pooling") ? field("pooling") : QString("sum");
    case PoolingFactor:
      return per_feature([](const json& f) { return pooling_factor_text(f.value("pooling_factor", json(1))); });
    case Ids: return per_feature([](const json& f) { return ids_text(f.value("ids", json("uniform"))); });
    case Sharding: {
      if (sh && sh->contains("type")) return QString::fromStdString(sh->at("type").is_string() ? sh->at("type").get<std::string>() : sh->at("type").dump());
      if (role == Qt::EditRole) return QString("default");
      const json d = value("/sharding/default");
      return QString("default (%1)").arg(QString::fromStdString(d.is_string() ? d.get<std::string>()
                                                                             : engine::to_string(engine::ShardingSpec{}.default_type)));
    }
    case Ranks: {
      if (planned_ranks) {
        if (role == Qt::EditRole || !plan_ || static_cast<size_t>(index.row()) >= plan_->tables.size()) return QString();
        std::set<int> ranks;
        for (const auto& shard : plan_->tables[static_cast<size_t>(index.row())].shards) ranks.insert(shard.rank);
        if (static_cast<int>(ranks.size()) == plan_->world_size && plan_->world_size > 1) return QString("auto: all");
        QStringList out;
        for (int r : ranks) out << QString::number(r);
        return "auto: " + out.join(", ");
      }
      const json& r = sh->at("ranks");
      if (!r.is_array()) return QString::fromStdString(r.dump());
      QStringList out;
      for (const auto& v : r) out << QString::fromStdString(v.dump());
      return out.join(", ");
    }
    default: return {};
  }
}

bool WorkloadModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (!index.isValid() || role != Qt::EditRole || index.row() >= rowCount() || index.column() >= ColumnCount) return false;
  const QString text = value.toString();
  try {
    edit(index, text);
  } catch (const nlohmann::json::exception&) {  // a document whose shape the edit cannot follow
    return false;
  }
  revalidate();
  return true;
}

void WorkloadModel::edit(const QModelIndex& index, const QString& text) {
  json& t = *table(index.row());
  json& sharding_tables = doc_["sharding"]["tables"];
  if (!sharding_tables.is_object()) sharding_tables = json::object();
  const std::string name = t.value("name", json("")).is_string() ? t.value("name", std::string()) : std::string();
  switch (index.column()) {
    case Name: {
      const std::string new_name = text.trimmed().toStdString();
      if (!name.empty() && sharding_tables.contains(name) && !sharding_tables.contains(new_name)) {
        sharding_tables[new_name] = sharding_tables[name];
        sharding_tables.erase(name);
      }
      t["name"] = new_name;
      break;
    }
    case NumEmbeddings: t["num_embeddings"] = typed(text); break;
    case EmbeddingDim: t["embedding_dim"] = typed(text); break;
    case Pooling: t["pooling"] = text.trimmed().toStdString(); break;
    case PoolingFactor:
      for (json* f : features_of(index.row())) (*f)["pooling_factor"] = parse_pooling_factor(text);
      break;
    case Ids:
      for (json* f : features_of(index.row())) (*f)["ids"] = parse_ids(text, f->value("ids", json("uniform")));
      break;
    case Sharding:
      if (text.trimmed() == "default" || text.trimmed().isEmpty())
        sharding_tables.erase(name);
      else
        sharding_tables[name]["type"] = text.trimmed().toStdString();
      break;
    case Ranks: {
      json& entry = sharding_tables[name];
      if (!entry.contains("type")) entry["type"] = value_or_default_type();
      const QString trimmed = text.trimmed();
      if (trimmed.isEmpty()) {
        entry.erase("ranks");
        break;
      }
      json ranks = json::array();
      for (const QString& part : trimmed.split(QRegularExpression("[,\\s]+"), Qt::SkipEmptyParts)) ranks.push_back(typed(part));
      entry["ranks"] = ranks;
      break;
    }
    default: break;
  }
}

std::string WorkloadModel::value_or_default_type() const {
  const json d = value("/sharding/default");
  return d.is_string() ? d.get<std::string>() : engine::to_string(engine::ShardingSpec{}.default_type);
}

Qt::ItemFlags WorkloadModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  return Qt::ItemIsSelectable | Qt::ItemIsEnabled | Qt::ItemIsEditable;
}

QVariant WorkloadModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"name", "num_embeddings", "embedding_dim", "pooling", "pooling factor",
                                "ids", "sharding type", "ranks"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

int WorkloadModel::add_table() {
  std::set<std::string> taken;
  for (int r = 0; r < rowCount(); ++r) taken.insert(table(r)->value("name", json("")).dump());
  if (doc_.contains("features") && doc_["features"].is_array())
    for (const auto& f : doc_["features"]) taken.insert(f.value("name", json("")).dump());
  int n = rowCount();
  std::string name;
  do name = QString("t%1").arg(n++).toStdString();
  while (taken.count(json(name).dump()) || taken.count(json("f_" + name).dump()));
  json dim = rowCount() > 0 ? table(rowCount() - 1)->value("embedding_dim", json(16)) : json(16);
  const int row = rowCount();
  beginInsertRows({}, row, row);
  doc_["tables"].push_back({{"name", name}, {"num_embeddings", 1000}, {"embedding_dim", dim}, {"pooling", "sum"},
                            {"feature_names", {"f_" + name}}});
  if (!doc_.contains("features") || !doc_["features"].is_array()) doc_["features"] = json::array();
  doc_["features"].push_back({{"name", "f_" + name}, {"pooling_factor", 1}, {"ids", "uniform"}});
  endInsertRows();
  revalidate();
  return row;
}

void WorkloadModel::remove_table(int row) {
  if (row < 0 || row >= rowCount()) return;
  const json names = table(row)->value("feature_names", json::array());
  const json name = table(row)->value("name", json());
  beginRemoveRows({}, row, row);
  doc_["tables"].erase(static_cast<size_t>(row));
  endRemoveRows();
  if (doc_.contains("features") && doc_["features"].is_array() && names.is_array()) {
    json kept = json::array();
    for (const auto& f : doc_["features"])
      if (std::find(names.begin(), names.end(), f.value("name", json())) == names.end()) kept.push_back(f);
    doc_["features"] = kept;
  }
  const json::json_pointer p("/sharding/tables");
  if (name.is_string() && doc_.contains(p) && doc_.at(p).is_object()) doc_.at(p).erase(name.get<std::string>());
  revalidate();
}

}  // namespace embedscope::ui
