// What run / plan / scaling say beside a simulated step about how far to trust it (profile_trust_text.h).
#include "profile_trust_text.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "embedscope/engine/cost/calibration.h"  // to_json(HardwareProfile)
#include "embedscope/engine/cost/profile_trust.h"
#include "embedscope/engine/workload/spec_error.h"
#include "output/output.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

StepTrust step_trust(const es::HardwareProfile& hw, int64_t p50_ns,
                     const std::function<int64_t(const es::HardwareProfile&)>& p50_on) {
  StepTrust t;
  t.measured_band = es::measured_step_band(hw, p50_ns);
  if (p50_on && !es::assumed_figures(hw).empty())
    t.assumed_range = std::pair{p50_on(es::assumption_corner(hw, false)), p50_on(es::assumption_corner(hw, true))};
  return t;
}

std::string step_trust_text(const es::HardwareProfile& hw, const StepTrust& t, const std::string& what) {
  std::string out;
  if (const std::string band = es::error_band_text(hw); !band.empty()) {
    out += fmt::format("profile      {}", band);
    if (t.measured_band)
      out += fmt::format("; so a measured {} of {} .. {}", what == "step p50" ? "step" : what, ms(static_cast<double>(t.measured_band->first)),
                         ms(static_cast<double>(t.measured_band->second)));
    out += "\n";
  }
  if (const std::string a = es::assumptions_text(hw); !a.empty()) {
    out += fmt::format("assumed      {}", a);
    if (t.assumed_range) out += "; " + what + " " + es::assumption_range_text(t.assumed_range->first, t.assumed_range->second);
    out += "\n";
  }
  return out;
}

json step_trust_json(const es::HardwareProfile& hw, const StepTrust& t) {
  json j = es::profile_trust_json(hw);
  j["measured_step_band_ns"] = t.measured_band ? json::array({t.measured_band->first, t.measured_band->second}) : json();
  j["assumption_step_range_ns"] = t.assumed_range ? json::array({t.assumed_range->first, t.assumed_range->second}) : json();
  return j;
}

std::string write_temporary_profile(const es::HardwareProfile& hw, const std::string& tag) {
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("embedscope_{}_{}.json", tag, getpid())).string();
  std::ofstream f(path);
  if (!(f << es::to_json(hw).dump())) throw es::SpecError(fmt::format("cannot write the temporary profile {}", path));
  return path;
}

}  // namespace embedscope::cli
