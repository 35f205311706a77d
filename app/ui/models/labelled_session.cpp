#include "models/labelled_session.h"

#include <QDir>

#include <algorithm>
#include <vector>

namespace embedscope::ui {

QStringList distinct_file_names(const QStringList& paths) {
  std::vector<QStringList> parts;  // each path's components, cleaned
  for (const QString& p : paths) parts.push_back(QDir::cleanPath(p).split('/', Qt::SkipEmptyParts));
  std::vector<qsizetype> tail(parts.size(), 1);  // how many trailing components each name shows
  auto name = [&](size_t i) {
    const QStringList& c = parts[i];
    return c.mid(std::max<qsizetype>(0, c.size() - tail[i])).join('/');
  };
  for (bool grew = true; grew;) {
    // the names that two different paths share so far: each shows one more component
    std::vector<bool> grow(parts.size(), false);
    for (size_t i = 0; i < parts.size(); ++i)
      for (size_t j = 0; j < parts.size(); ++j)
        if (i != j && parts[i] != parts[j] && name(i) == name(j)) grow[i] = true;
    grew = false;
    for (size_t i = 0; i < parts.size(); ++i)
      if (grow[i] && tail[i] < parts[i].size()) {
        ++tail[i];
        grew = true;
      }
  }
  QStringList out;
  for (size_t i = 0; i < parts.size(); ++i) out << name(i);
  return out;
}

}  // namespace embedscope::ui
