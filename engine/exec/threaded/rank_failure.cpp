// rank_error_of and first_failure (rank_failure.h).
#include "rank_failure.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine::threaded {

RankError rank_error_of(int rank, int64_t time_ns, const std::exception_ptr& e,
                        const std::function<std::string(const CollectiveError&)>& explain_peer) {
  RankError out{rank, time_ns, RunEnd::crashed, false, false, ""};
  try {
    std::rethrow_exception(e);
  } catch (const InvalidIdsError& x) {
    out.kind = RunEnd::bad_input;  // the input's fault, not a crash (tester49 F11)
    out.bad_input = true;
    out.message = x.what();
  } catch (const InputFileError& x) {
    out.kind = RunEnd::bad_input;
    out.bad_input = true;
    out.message = x.what();
  } catch (const sessions::SessionWriteError& x) {  // the session's disk is full (tester49 F3)
    out.kind = RunEnd::write_failed;
    out.message = x.what();
  } catch (const OomError& x) {
    out.kind = RunEnd::oom;
    out.message = x.what();
  } catch (const SplitMismatchError& x) {
    out.message = x.what();
  } catch (const CollectiveError& x) {
    const std::string peer = explain_peer ? explain_peer(x) : std::string();  // a peer may be gone
    out.kind = x.timed_out ? RunEnd::hang : RunEnd::crashed;
    out.consequence = !x.timed_out;
    out.message = fmt::format("rank {}: {}{}", rank, x.what(), peer);
  } catch (const std::exception& x) {
    out.message = fmt::format("rank {}: {}", rank, x.what());
  } catch (...) {
    out.message = fmt::format("rank {}: unknown error", rank);
  }
  return out;
}

RankError first_failure(std::vector<RankError> errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const RankError& a, const RankError& b) {
    if (a.consequence != b.consequence) return !a.consequence;
    return a.time_ns < b.time_ns;
  });
  return errors.front();
}

void throw_if_diverged(double loss, int64_t step) {
  if (!std::isfinite(loss)) throw std::runtime_error(fmt::format("training diverged: the loss is {} at step {}", loss, step));
}

}  // namespace embedscope::engine::threaded
