// The Summary's rank table in one unit a column (tester60a F5): the table-wise run's exposed
// communication read "1.25 s, 1.30 s, 989.70 ms, 1.01 s"; `stats` prints the same four in ms
// (1253.03, 1301.33, 989.70, 1011.66 ms), and so does the table now.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/rank_stats_model.h"

using embedscope::ui::RankStatsModel;

namespace {

std::vector<std::string> ui60b_column(const RankStatsModel& m, int column) {
  std::vector<std::string> out;
  for (int r = 0; r < m.rowCount(); ++r) out.push_back(m.data(m.index(r, column)).toString().toStdString());
  return out;
}

}  // namespace

TEST(Ui60bRankUnits, ATimeColumnReadsInOneUnit) {
  embedscope::sessions::RunStats st;
  st.steps = 20;
  const std::vector<int64_t> exposed = {1'253'030'000, 1'301'330'000, 989'700'000, 1'011'660'000};
  for (int r = 0; r < 4; ++r) {
    embedscope::sessions::RankStats rs;
    rs.rank = r;
    rs.exposed_comm_ns = exposed[static_cast<size_t>(r)];
    rs.comm_ns = 1'400'000'000 + r;  // all >= 1 s: seconds, as before
    rs.compute_ns = r == 0 ? 2'000 : 3'000'000'000'000;  // 2 us and 50 min: the larger's unit (not 3e9 us)
    st.ranks.push_back(rs);
  }
  const RankStatsModel m(st);
  EXPECT_EQ(ui60b_column(m, RankStatsModel::ExposedComm),
            (std::vector<std::string>{"1253.03 ms", "1301.33 ms", "989.70 ms", "1011.66 ms"}));
  EXPECT_EQ(ui60b_column(m, RankStatsModel::Comm), (std::vector<std::string>{"1.40 s", "1.40 s", "1.40 s", "1.40 s"}));
  EXPECT_EQ(ui60b_column(m, RankStatsModel::Compute), (std::vector<std::string>{"0.0 min", "50.0 min", "50.0 min", "50.0 min"}));
  EXPECT_EQ(ui60b_column(m, RankStatsModel::Idle), (std::vector<std::string>{"0 ns", "0 ns", "0 ns", "0 ns"}));
  // the raw value is unchanged
  EXPECT_EQ(m.data(m.index(2, RankStatsModel::ExposedComm), Qt::UserRole).toLongLong(), 989'700'000);
}
