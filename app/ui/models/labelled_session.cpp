#include "models/labelled_session.h"

#include <string>
#include <vector>

#include "embedscope/sessions/analysis/compare.h"  // distinct_file_names, as `embedscope compare` names files

namespace embedscope::ui {

QStringList distinct_file_names(const QStringList& paths) {
  std::vector<std::string> in;
  for (const QString& p : paths) in.push_back(p.toStdString());
  QStringList out;
  for (const auto& n : sessions::distinct_file_names(in)) out << QString::fromStdString(n);
  return out;
}

}  // namespace embedscope::ui
