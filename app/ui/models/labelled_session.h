#pragma once
// A session with the label the workbench shows for it, the unit of every comparison.

#include <QString>

#include <memory>

#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

/// One session to compare, with the label shown for it ("A", a file name, a scenario run's label).
struct LabelledSession {
  QString label;
  std::shared_ptr<const sessions::SessionReader> session;
};

}  // namespace embedscope::ui
