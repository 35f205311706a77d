#include "embedscope/sessions/analysis/rank_session.h"

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

std::optional<PartialRankSession> partial_rank_session(const SessionReader& session) {
  PartialRankSession p;
  p.process_rank = session.meta(meta::kProcessRank);
  if (p.process_rank.empty()) return std::nullopt;
  p.world_size = std::strtoll(session.meta(meta::kWorldSize, "0").c_str(), nullptr, 10);
  std::set<int32_t> here;
  for (const auto& lane : session.lanes()) here.insert(lane.rank);
  p.ranks_here = static_cast<int64_t>(here.size());
  if (p.world_size <= 1 || p.ranks_here >= p.world_size) return std::nullopt;
  return p;
}

std::string partial_rank_session_refusal(const PartialRankSession& part, const std::string& file, std::string_view missing,
                                         std::string_view why, std::string_view command) {
  std::string merged, ranks;
  static const std::regex rank_file(R"(^(.*)\.rank[0-9]+\.db$)");
  std::smatch m;
  if (std::regex_match(file, m, rank_file)) {
    merged = m[1].str() + ".db";
    ranks = m[1].str() + ".rank*.db";
  }
  std::error_code ec;
  const std::string hint =
      merged.empty()
          ? fmt::format("merge the ranks' sessions (embedscope merge RANK0.db RANK1.db ... -o MERGED.db) and {} that", command)
      : std::filesystem::exists(merged, ec)
          ? fmt::format("{} the merged session {} (launch wrote it beside the ranks' sessions)", command, merged)
          : fmt::format("merge the ranks' sessions (embedscope merge {} -o {}) and {} that", ranks, merged, command);
  const int64_t other = part.world_size - part.ranks_here;
  return fmt::format("{}: the session of rank {} alone of a {}-rank run (each process wrote its own): the {} of the other "
                     "{} rank{} are not in it, so {}; {}",
                     file, part.process_rank, part.world_size, missing, other, other == 1 ? "" : "s", why, hint);
}

}  // namespace embedscope::sessions
