// Tester38 #15: `embedscope-ui --compare A.db B.db --report -o DIR` writes every page of the
// comparison (Figures, Timelines, Memory) as PNG and DIR/index.html, as a session's report;
// before, it failed with "--report needs a session file".
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QImage>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "charts/colors.h"
#include "ui/support/ui_fixtures.h"

namespace {
std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST(CompareReport, WritesEveryComparePageAndAnIndex) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_cmp_report_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(embedscope::ui::fixtures::fixture_session(), dir / "a.db");
  std::filesystem::copy_file(embedscope::ui::fixtures::fixture_session(), dir / "b.db");
  const std::string ui = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI);
  const std::string cmd = ui + " --compare " + (dir / "a.db").string() + " " + (dir / "b.db").string() + " --report -o " +
                          (dir / "cmp").string() + " 2>" + (dir / "err.txt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // the offscreen platform's warnings are filtered also where the user chose it (tester40 #14)
  EXPECT_EQ(read_text(dir / "err.txt").find("propagateSizeHints"), std::string::npos) << read_text(dir / "err.txt");
  for (const char* f : {"figures.png", "timelines.png", "memory.png"}) {
    QImage img(QString::fromStdString((dir / "cmp" / f).string()));
    EXPECT_EQ(img.width(), 1600) << f;  // the report's window width
    EXPECT_GE(img.height(), 900) << f;
  }
  const std::string page = read_text(dir / "cmp" / "index.html");
  EXPECT_NE(page.find("<title>Embedscope comparison: a.db | b.db</title>"), std::string::npos) << page.substr(0, 300);
  const size_t figures = page.find("<img src=\"figures.png\""), timelines = page.find("<img src=\"timelines.png\""),
               memory = page.find("<img src=\"memory.png\"");
  ASSERT_NE(figures, std::string::npos);
  ASSERT_NE(timelines, std::string::npos);
  ASSERT_NE(memory, std::string::npos);
  EXPECT_LT(figures, timelines);  // the tabs' order
  EXPECT_LT(timelines, memory);
  // one session is no comparison; no -o: a clear error, exit 2
  const std::string one = ui + " --compare " + (dir / "a.db").string() + " --report -o " + (dir / "c2").string() + " 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system((one + " >/dev/null").c_str())), 2);
  const std::string no_dir = ui + " --compare " + (dir / "a.db").string() + " " + (dir / "b.db").string() + " --report 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(no_dir.c_str())), 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "c2"));
  std::filesystem::remove_all(dir);
}

// tester37 #20: `--compare A.db TRACE.json` said "not an SQLite database"; a trace (or memory
// snapshot) given to --compare is imported first, as opening it does, and its session compared.
TEST(CompareReport, ATraceGivenToCompareIsImportedFirst) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_cmp_trace_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(embedscope::ui::fixtures::fixture_session(), dir / "a.db");
  std::ofstream(dir / "job.json") << R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
    {"ph": "X", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 10}]})";
  const std::string ui = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI);
  const std::string cmd = ui + " --compare " + (dir / "a.db").string() + " " + (dir / "job.json").string() +
                          " --report -o " + (dir / "cmp").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_TRUE(std::filesystem::exists(dir / "job.db"));  // the import, beside its trace
  const std::string page = read_text(dir / "cmp" / "index.html");
  EXPECT_NE(page.find("<title>Embedscope comparison: a.db | job.db</title>"), std::string::npos) << page.substr(0, 300);
  // again: the earlier import of the unchanged trace is reused (no job-2.db)
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_FALSE(std::filesystem::exists(dir / "job-2.db"));
  // a folder of per-rank traces (tester39): imported as one job, as opening it does
  std::filesystem::create_directories(dir / "jobdir");
  std::filesystem::copy_file(dir / "job.json", dir / "jobdir" / "rank0.json");
  const std::string folder = ui + " --compare " + (dir / "a.db").string() + " " + (dir / "jobdir").string() +
                             " --report -o " + (dir / "cmpdir").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(folder.c_str()), 0) << folder;
  EXPECT_TRUE(std::filesystem::exists(dir / "jobdir.db"));  // beside the folder
  EXPECT_NE(read_text(dir / "cmpdir" / "index.html").find("a.db | jobdir.db"), std::string::npos);
  // an Nsight Systems SQLite export (tester39): imported, not refused as "not an Embedscope session"
  std::filesystem::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/fuzz/nsys_sqlite/fixture.sqlite", dir / "capture.sqlite");
  const std::string nsys = ui + " --compare " + (dir / "a.db").string() + " " + (dir / "capture.sqlite").string() +
                           " --report -o " + (dir / "cmpnsys").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(nsys.c_str()), 0) << nsys;
  EXPECT_TRUE(std::filesystem::exists(dir / "capture.db"));
  // a trace that cannot be imported: exit 2, the import's error
  std::ofstream(dir / "bad.json") << "{\"traceEvents\": [\n";
  const std::string bad = ui + " --compare " + (dir / "a.db").string() + " " + (dir / "bad.json").string() + " --report -o " +
                          (dir / "cmp2").string() + " 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(bad.c_str())), 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "cmp2" / "index.html"));
  std::filesystem::remove_all(dir);
}

// tester39: for sessions of realistic length, `--compare ... --report` wrote the Figures page
// while the comparison's analysis still ran ("Analysing 2 sessions ..." and no chart): the job
// belongs to the CompareView, not to the page the report waited on. The report waits for it now:
// session B's color is on the image (its 300-step line and exposed-comm bars).
TEST(CompareReport, TheFiguresOfLongSessionsAreDrawnNotAnalysing) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_cmp_long_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // a run of 300 steps (the analysis takes long enough; step_session's 30,000 synthetic steps do not)
  const std::string a = (dir / "a.db").string(), b = (dir / "many.db").string();
  std::filesystem::copy_file(embedscope::ui::fixtures::fixture_session(), a);
  const std::string run = std::string(EMBEDSCOPE_CLI) + " run --preset tiny --steps 300 -o " + b + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(run.c_str()), 0) << run;
  const std::string ui = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI);
  const std::string cmd = ui + " --compare " + a + " " + b + " --report -o " + (dir / "cmp").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  QImage img(QString::fromStdString((dir / "cmp" / "figures.png").string()));
  ASSERT_FALSE(img.isNull());
  const QRgb b_color = embedscope::ui::session_color(1).rgb();
  int64_t b_pixels = 0;
  for (int y = img.height() / 2; y < img.height(); ++y)  // the charts' half of the page
    for (int x = 0; x < img.width(); ++x) b_pixels += img.pixel(x, y) == b_color;
  EXPECT_GT(b_pixels, 500) << "no chart of session B on figures.png";
  std::filesystem::remove_all(dir);
}
