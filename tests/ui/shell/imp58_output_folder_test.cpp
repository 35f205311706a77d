// embedscope-ui's outputs in a folder that does not exist yet: --screenshot makes it as
// `embedscope run -o` does (make_output_folder; before: "cannot write the screenshot: No such file
// or directory"), --report -o DIR makes DIR with every folder above it; a file where the folder
// would go is refused naming --screenshot, the path and the folder.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QImage>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "ui/support/ui_fixtures.h"

namespace {
std::string imp58_read(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
int imp58_ui(const std::string& args, const std::filesystem::path& err) {
  const std::string cmd = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " " + args + " 2>" + err.string();
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
}  // namespace

TEST(Imp58UiOutputFolder, ScreenshotAndReportMakeTheirMissingFolders) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_imp58_ui_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string session = embedscope::ui::fixtures::fixture_session();
  const auto shot = dir / "shots" / "deeper" / "window.png";
  ASSERT_EQ(imp58_ui(session + " --screenshot " + shot.string(), dir / "err1.txt"), 0) << imp58_read(dir / "err1.txt");
  const QImage img(QString::fromStdString(shot.string()));
  EXPECT_FALSE(img.isNull()) << shot;
  EXPECT_GT(img.width(), 100);
  const auto report = dir / "reports" / "deeper" / "r1";
  ASSERT_EQ(imp58_ui("--report " + session + " -o " + report.string(), dir / "err2.txt"), 0) << imp58_read(dir / "err2.txt");
  EXPECT_TRUE(std::filesystem::is_regular_file(report / "index.html")) << imp58_read(dir / "err2.txt");
  // a file where the folder would go: refused, nothing written
  std::ofstream(dir / "afile") << "x";
  const auto blocked = dir / "afile" / "w.png";
  EXPECT_EQ(imp58_ui(session + " --screenshot " + blocked.string(), dir / "err3.txt"), 2) << imp58_read(dir / "err3.txt");
  EXPECT_NE(imp58_read(dir / "err3.txt")
                .find("--screenshot " + blocked.string() + ": cannot make the folder " + (dir / "afile").string()),
            std::string::npos)
      << imp58_read(dir / "err3.txt");
  std::filesystem::remove_all(dir);
}
