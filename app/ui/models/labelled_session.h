#pragma once
// A session with the label the workbench shows for it, the unit of every comparison.

#include <QString>
#include <QStringList>

#include <memory>

#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

/// One session to compare, with the label shown for it ("A", a file name, a scenario run's label).
struct LabelledSession {
  QString label;
  std::shared_ptr<const sessions::SessionReader> session;
};

/// What the workbench calls each of several session files side by side: the file name, or where
/// two files share it (run1/criteo.db, run3/criteo.db: tester40 #1), the shortest tail of their
/// paths that tells them apart ("run1/criteo.db"); the same path twice stays the same name.
/// `paths` as given (relative or absolute, '/'-separated); the result has one name per path
/// (sessions::distinct_file_names, which `embedscope compare` uses).
QStringList distinct_file_names(const QStringList& paths);

}  // namespace embedscope::ui
