// tester62a F10: `export --format chrome` gave a collective's span one `bytes`, the rank's bytes
// sent + received, said nowhere; a Perfetto reader took it for the message or the bytes sent. The
// span has `bytes_sent` and `bytes_received` apart now (and keeps `bytes` for older readers).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"

using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::scratch_db;

// A 4-rank vocab_parallel + sequence_parallel run in bf16 (H 128, S 128, B 2: T = 256 tokens).
// embedding/reduce_scatter's message is the [T x H] bf16 partial sum, 256 x 128 x 2 = 65,536 B; a
// rank sends 3/4 of it (49,152 B: the other ranks' slices) and receives 3/4 of it (its slice from
// each of the 3 others, 3 x 64 x 128 x 2 = 49,152 B): bytes 98,304. Every comm span with bytes
// says both, summing to its bytes.
TEST(Lm63ChromeBytes, ACollectiveSpanSaysItsBytesSentAndReceivedApart) {
  const auto dir = import_scratch();
  const std::string wl = (dir / "lm63_vp4.json").string(), db = scratch_db("lm63_vp4.db"),
                    trace = (dir / "lm63_vp4.trace.json").string();
  std::ofstream(wl) << R"({"model": "lm_embedding", "name": "lm63_vp4", "vocab_size": 4000, "hidden_size": 128,
    "sequence_length": 128, "micro_batch_size": 2, "data_type": "bf16", "body_layers": 1,
    "sharding": {"type": "vocab_parallel", "sequence_parallel": true}, "devices": {"count": 4}, "steps": 2})";
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + wl + " --force-overwrite -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "export " + db + " --format chrome --force-overwrite -o " + trace, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(trace);
  const auto j = nlohmann::json::parse(in);
  int reduce_scatters = 0, with_bytes = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "comm" || !e.contains("args")) continue;
    const auto& a = e.at("args");
    if (!a.contains("bytes") || e.value("name", "") == "record_param_comms") continue;
    ++with_bytes;
    ASSERT_TRUE(a.contains("bytes_sent") && a.contains("bytes_received")) << e.dump();
    EXPECT_EQ(a.at("bytes_sent").get<int64_t>() + a.at("bytes_received").get<int64_t>(), a.at("bytes").get<int64_t>())
        << e.dump();
    if (e.value("name", "") == "embedding/reduce_scatter") {
      ++reduce_scatters;
      EXPECT_EQ(a.at("bytes").get<int64_t>(), 98'304) << e.dump();
      EXPECT_EQ(a.at("bytes_sent").get<int64_t>(), 49'152) << e.dump();
      EXPECT_EQ(a.at("bytes_received").get<int64_t>(), 49'152) << e.dump();
    }
  }
  EXPECT_EQ(reduce_scatters, 4 * 2);  // every rank, every step
  EXPECT_GT(with_bytes, reduce_scatters);
}
