#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

const char* to_string(OpCategory c) {
  switch (c) {
    case OpCategory::input: return "input";
    case OpCategory::lookup: return "lookup";
    case OpCategory::comm: return "comm";
    case OpCategory::dense: return "dense";
    case OpCategory::optimizer: return "optimizer";
    case OpCategory::memcpy: return "memcpy";
    case OpCategory::other: return "other";
  }
  return "other";
}

const char* to_string(Lane l) {
  switch (l) {
    case Lane::compute: return "compute";
    case Lane::comm: return "comm";
    case Lane::gpu_compute: return "gpu_compute";
    case Lane::gpu_comm: return "gpu_comm";
    case Lane::gpu_copy: return "gpu_copy";
  }
  return "compute";
}

bool category_from_string(const std::string& s, OpCategory& out) {
  for (int i = 0; i < kNumCategories; ++i)
    if (s == to_string(static_cast<OpCategory>(i))) {
      out = static_cast<OpCategory>(i);
      return true;
    }
  return false;
}

}  // namespace embedscope::sessions
