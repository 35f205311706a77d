// The held-out and compression figures a side-by-side view of remedies needs
// (sessions/analysis/model_quality.h): read from sessions written here with hand-made metadata,
// the numbers of a user's comparison (fp32 state vs fp16 state vs a hashed int8 table).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/model_quality.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace ss = embedscope::sessions;

namespace {
// A session of `steps` measured steps (2 ranks; warm-up step -1 left out) with the metadata given.
std::string mq_session(const std::string& name, int steps, const std::string& held_out, const std::string& storage) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("es_mq_" + std::to_string(getpid()) + "_" + name + ".db")).string();
  std::filesystem::remove(path);
  ss::SessionWriter w(path);
  w.set_metadata(ss::meta::kWorkloadName, name);
  if (!held_out.empty()) w.set_metadata(ss::meta::kHeldOutJson, held_out);
  if (!storage.empty()) w.set_metadata(ss::meta::kTableStorageJson, storage);
  for (int step = -1; step < steps; ++step)
    for (int rank = 0; rank < 2; ++rank) {
      ss::StepMetric m;
      m.step = step;
      m.rank = rank;
      m.start_ns = 1000 * (step + 1);
      m.end_ns = m.start_ns + 900;
      w.add_step(m);
    }
  w.close("complete");
  return path;
}

const char* kFp32 =
    R"([{"table":"t0","data_type":"fp32","weight_bytes":[3200000,0],"optimizer_state_bytes":[6400000,0]},)"
    R"({"table":"t1","data_type":"fp32","weight_bytes":[0,2560000],"optimizer_state_bytes":[0,5120000]}])";
const char* kFp16State =
    R"([{"table":"t0","data_type":"fp32","optimizer_state_type":"fp16","weight_bytes":[3200000,0],)"
    R"("optimizer_state_bytes":[3200000,0]},{"table":"t1","data_type":"fp32","optimizer_state_type":"fp16",)"
    R"("weight_bytes":[0,2560000],"optimizer_state_bytes":[0,2560000]}])";
// t0 int8 (50,000 x 24 B), relative error 0.0037; t1 hashed to 2,000 rows, 141 collisions over
// 5 steps; t0 hashed too, 34 collisions
const char* kHashInt8 =
    R"([{"table":"t0","data_type":"int8","hash_size":5000,"weight_bytes":[120000,0],"optimizer_state_bytes":[640000,0],)"
    R"("relative_error":0.0037,"max_abs_error":0.0002,"hash_collisions":34},{"table":"t1","data_type":"fp32",)"
    R"("hash_size":2000,"weight_bytes":[0,256000],"optimizer_state_bytes":[0,512000],"hash_collisions":141,)"
    R"("relative_error":0}])";
}  // namespace

// fp32: held-out loss 0.6268 (AUC 0.4738 on 200 samples, 100 positive); fp16 state: 0.7221
// (+15.2 %: 0.7221 / 0.6268 - 1 = 0.15204), AUC 0.5129; the hashed int8 run: 0.6300, no AUC
// (one class). Bytes: fp32 5,760,000 + 11,520,000; fp16 state 5,760,000 + 5,760,000; hashed
// 376,000 + 1,152,000; its error the int8 table's 0.0037 (fp32 t1's 0 is not a stored-row
// error), collisions (34 + 141) / 5 steps = 35.0 a step.
TEST(ModelQuality, HeldOutLossAndTableFiguresByHand) {
  const std::string a = mq_session("fp32", 5, R"({"samples":200,"positives":100,"loss":0.6268,"auc":0.4738})", kFp32);
  const std::string b = mq_session("fp16", 5, R"({"samples":200,"positives":100,"loss":0.7221,"auc":0.5129})", kFp16State);
  const std::string c = mq_session("hash", 5, R"({"samples":200,"positives":0,"loss":0.63,"auc":null})", kHashInt8);
  const ss::SessionReader ra(a), rb(b), rc(c);
  const ss::ModelQuality qa = ss::model_quality(ra), qb = ss::model_quality(rb), qc = ss::model_quality(rc);
  EXPECT_DOUBLE_EQ(*qa.held_out_loss, 0.6268);
  EXPECT_DOUBLE_EQ(*qa.held_out_auc, 0.4738);
  EXPECT_TRUE(qa.held_out_auc_se.has_value());
  EXPECT_EQ(qa.held_out_samples, 200);
  EXPECT_EQ(qa.table_weight_bytes, 5760000);
  EXPECT_EQ(qa.optimizer_state_bytes, 11520000);
  EXPECT_FALSE(qa.max_relative_error.has_value());
  EXPECT_FALSE(qa.collisions_per_step.has_value());
  EXPECT_EQ(qb.optimizer_state_bytes, 5760000);
  EXPECT_DOUBLE_EQ(*qc.held_out_loss, 0.63);
  EXPECT_FALSE(qc.held_out_auc.has_value());
  EXPECT_EQ(qc.table_weight_bytes, 376000);
  EXPECT_EQ(qc.optimizer_state_bytes, 1152000);
  EXPECT_DOUBLE_EQ(*qc.max_relative_error, 0.0037);
  EXPECT_DOUBLE_EQ(*qc.collisions_per_step, 35.0);

  // the fp16 state run has the higher AUC but the worst held-out loss: the lowest is fp32's
  EXPECT_EQ(ss::best_held_out_loss({qa, qb, qc}), 0u);
  const ss::ModelQualityBlock blk = ss::model_quality_block({&ra, &rb, &rc}, {"A", "B", "C"});
  ASSERT_EQ(blk.json.size(), 3u);
  EXPECT_EQ(blk.json[0]["lowest_held_out_loss"], true);
  EXPECT_EQ(blk.json[1]["lowest_held_out_loss"], false);
  EXPECT_NEAR(blk.json[1]["held_out_loss_vs_first"].get<double>(), 0.7221 / 0.6268 - 1.0, 1e-12);
  EXPECT_EQ(blk.json[2]["held_out_auc"], nullptr);
  EXPECT_EQ(blk.json[2]["table_weight_bytes"], 376000);
  EXPECT_DOUBLE_EQ(blk.json[2]["collisions_per_step"].get<double>(), 35.0);
  // names padded to 18, then each column right-aligned to its widest cell ("0.6268 lowest" 13,
  // "0.7221 (+15.2 %)" 16, "0.6300 (+0.5 %)" 15) after two spaces; bytes: 5,760,000 B = 5.5 MiB,
  // 11,520,000 B = 11.0 MiB, 376,000 B = 367.2 KiB, 1,152,000 B = 1.1 MiB
  EXPECT_NE(blk.text.find("\nheld-out loss       0.6268 lowest  0.7221 (+15.2 %)  0.6300 (+0.5 %)\n"), std::string::npos)
      << blk.text;
  EXPECT_NE(blk.text.find("\ntable weights             5.5 MiB           5.5 MiB        367.2 KiB\n"), std::string::npos)
      << blk.text;
  EXPECT_NE(blk.text.find("\noptimizer state          11.0 MiB           5.5 MiB          1.1 MiB\n"), std::string::npos)
      << blk.text;
  EXPECT_NE(blk.text.find("\ncollisions/step                 -                 -             35.0\n"), std::string::npos)
      << blk.text;
  EXPECT_THROW(ss::model_quality_block({&ra}, {"A", "B"}), std::invalid_argument);
}

// A session without either metadata (older files, an import): every figure absent, no text.
TEST(ModelQuality, OlderSessionHasNoFigures) {
  const std::string p = mq_session("old", 2, "", "");
  const ss::SessionReader r(p);
  const ss::ModelQuality q = ss::model_quality(r);
  EXPECT_FALSE(q.held_out_loss.has_value());
  EXPECT_FALSE(q.has_storage);
  EXPECT_EQ(ss::model_quality_text({"old"}, {q}), "");
  EXPECT_EQ(ss::model_quality_json(q)["table_weight_bytes"], nullptr);
  EXPECT_FALSE(ss::best_held_out_loss({q}).has_value());
}
