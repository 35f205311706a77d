// The output projection's device-memory bytes in the LM step program (program/lm_program.h):
// the GEMMs read the projection as it is stored for them, the fp32 weights or the bf16 / fp16
// read copy's 2-byte elements, and the cost model charges those bytes.
#include <gtest/gtest.h>

#include <string>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/program/lm_program.h"

using namespace embedscope::engine;

namespace {

// vocab_parallel on 2 ranks, V 48 (R = 24 rows a rank), H 8, T = 8 x 2 = 16 tokens
LmWorkloadSpec projection_spec(LmDataType t, int64_t vocab, int64_t hidden) {
  LmWorkloadSpec s;
  s.vocab_size = vocab;
  s.hidden_size = hidden;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.body_layers = 1;
  s.world_size = 2;
  s.sharding = LmSharding::vocab_parallel;
  s.data_type = t;
  s.steps = 1;
  return s;
}

const ProgramOp& op_named(const StepProgram& p, const std::string& name) {
  for (const ProgramOp& op : p.ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

TEST(LmProjectionBytes, TheGemmsReadTheStoredPrecision) {
  // Tc = 16, R = 24, H = 8. logits: Z 16 x 8 x 4 = 512 B, the projection 24 x 8 x e, the logits
  // written 16 x 24 x 4 = 1,536 B. backward: the logits read and the gradient of them written
  // 2 x 1,536, the projection read 24 x 8 x e and its fp32 gradient written 768 B, Z read and its
  // gradient written 2 x 512
  const StepProgram fp32 = build_lm_step_program(projection_spec(LmDataType::fp32, 48, 8), 1, 0);
  EXPECT_EQ(op_named(fp32, "output_projection/logits").bytes, 512 + 768 + 1536);               // 2,816
  EXPECT_EQ(op_named(fp32, "output_projection/backward").bytes, 2 * 1536 + 768 + 768 + 1024);  // 5,632
  for (LmDataType t : {LmDataType::bf16, LmDataType::fp16}) {
    const StepProgram half = build_lm_step_program(projection_spec(t, 48, 8), 1, 0);
    EXPECT_EQ(op_named(half, "output_projection/logits").bytes, 512 + 384 + 1536);               // 2,432
    EXPECT_EQ(op_named(half, "output_projection/backward").bytes, 2 * 1536 + 384 + 768 + 1024);  // 5,248
  }
}

TEST(LmProjectionBytes, TheCostModelChargesTheReadCopysBytes) {
  // V 131,072 on 2 ranks: R = 65,536, H 64, Tc 16: memory-bound on h100_sxm (3.35 TB/s x 0.5).
  // bf16 logits: (16 x 64 + 16 x 65,536) x 4 + 65,536 x 64 x 2 = 12,587,008 B -> 7,514.6 ns; the
  // math, 2 x 16 x 65,536 x 64 = 134.2 MFLOP at 989.4 TFLOP/s x 0.6, 0.23 us: 5,000 + 7,515 ns.
  // Read as fp32 it would be 20,975,616 B, 17,523 ns.
  const HardwareProfile hw = load_hardware_profile("h100_sxm");
  const StepProgram half = build_lm_step_program(projection_spec(LmDataType::bf16, 131072, 64), 0, 0);
  const ProgramOp& logits = op_named(half, "output_projection/logits");
  EXPECT_EQ(logits.bytes, 12587008);
  ASSERT_TRUE(lm_op_gemm_in_half_precision(projection_spec(LmDataType::bf16, 131072, 64), logits));
  EXPECT_EQ(half_precision_gemm_ns(logits, hw), 5000 + 7515);
}

}  // namespace
