// `embedscope-ui ... --screenshot FILE` never destroys a file (tester37 D0): a name without an
// image type, one of the sessions shown, or an existing file that is not an image is refused
// before anything is opened, and the file keeps every byte; an existing image is replaced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QImage>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;

fs::path shot_dir() {
  const fs::path d = fs::temp_directory_path() / ("es_shot_target_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

// A one-rank, one-step session at `path`.
void shot_session(const fs::path& path) {
  fs::remove(path);
  embedscope::sessions::SessionWriter w(path.string());
  w.set_metadata(embedscope::sessions::meta::kWorkloadName, "shot");
  w.add_lane({0, 0, "compute", "thread"});
  w.add_step({0, 0, 0, 1'000'000, 0.0, 0, 0});
  w.close("complete");
}

std::string shot_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ShotRun {
  int code = -1;
  std::string out;
};
ShotRun shot_ui(const std::string& args) {
  const std::string cmd = "QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' " + args + " 2>&1";
  ShotRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
}  // namespace

TEST(ScreenshotTarget, NothingButAnImageIsEverWrittenOver) {
  const fs::path d = shot_dir();
  const fs::path session = d / "run.db", other = d / "other.db", as_png = d / "session_named.png", text = d / "notes.txt";
  shot_session(session);
  shot_session(other);
  shot_session(as_png);
  std::ofstream(text) << "my notes";
  const std::string session_bytes = shot_bytes(session), other_bytes = shot_bytes(other), png_bytes = shot_bytes(as_png);

  // the session itself as the screenshot's name (no image type): refused, untouched
  auto r = shot_ui(session.string() + " --screenshot " + session.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(session.string() + ": not written: the name must end in an image type, e.g. .png"), std::string::npos)
      << r.out;
  EXPECT_EQ(shot_bytes(session), session_bytes);
  // another session, meant as a second session to open
  r = shot_ui(session.string() + " --screenshot " + other.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(shot_bytes(other), other_bytes);
  // a session named .png, shown and given as the screenshot
  r = shot_ui(as_png.string() + " --screenshot " + as_png.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not written: it is one of the sessions shown"), std::string::npos) << r.out;
  EXPECT_EQ(shot_bytes(as_png), png_bytes);
  // an existing file that is not an image, under an image name
  const fs::path text_png = d / "notes.png";
  fs::copy_file(text, text_png, fs::copy_options::overwrite_existing);
  r = shot_ui(session.string() + " --screenshot " + text_png.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not written: the file exists and is not an image"), std::string::npos) << r.out;
  EXPECT_EQ(shot_bytes(text_png), "my notes");

  // a new image, then the same image again: written, then replaced
  const fs::path shot = d / "window.png";
  r = shot_ui(session.string() + " --screenshot " + shot.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(QImage(QString::fromStdString(shot.string())).isNull());
  r = shot_ui(session.string() + " --screenshot " + shot.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(QImage(QString::fromStdString(shot.string())).isNull());
}
