// The test main of ui_test: one QApplication (offscreen) for every workbench test.
#include <gtest/gtest.h>

#include <QApplication>
#include <QSettings>

#include <filesystem>

#include "support/test_tmpdir.h"

int main(int argc, char** argv) {
  // every scratch session, report and settings file of the run in one folder, removed when all pass
  embedscope::test_support::TestTmpDir tmp;
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  // settings of the test run stay in a scratch folder
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope,
                     QString::fromStdString((std::filesystem::temp_directory_path() / "es_ui_settings").string()));
  QApplication::setOrganizationName("EmbedscopeTest");
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  tmp.finish(rc == 0);
  return rc;
}
