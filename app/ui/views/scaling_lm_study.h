#pragma once
// The lm_embedding scaling study file (`embedscope scaling X.json --json` of an lm_embedding
// workload, engine/exec/lm_scaling_study.h to_json) read back for the workbench's scaling page,
// and the one type the page opens either study file as.

#include <QString>

#include <string>
#include <variant>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/exec/lm_scaling_study.h"
#include "embedscope/engine/exec/scaling_study.h"

namespace embedscope::ui {

/// A scaling study file as the page opens it: a DLRM study (engine::ScalingStudy) or an
/// lm_embedding one (engine::LmScalingStudy), told apart by the JSON's "model".
using ScalingStudyFile = std::variant<engine::ScalingStudy, engine::LmScalingStudy>;

/// The inverse of engine::to_json(const LmScalingStudy&): every key it writes is read back
/// ("efficiency_baseline" and "tokens_per_s_per_gpu", which follow from the points, are not;
/// "session" and "write_failed" are optional). Times in ns, bytes in bytes, shares in [0, 1].
/// Throws engine::SpecError "<origin>: <JSON pointer>: <reason>" for a missing or mistyped key,
/// a "model" other than "lm_embedding", a sharding type that is not an LM one (vocab_parallel,
/// data_parallel, row_wise), or gpus outside [1, kMaxSimulatedRanks].
engine::LmScalingStudy lm_scaling_study_from_json(const nlohmann::json& j, const std::string& origin);

/// Whether `j` (a study file's JSON) is an lm_embedding study: "model": "lm_embedding".
bool is_lm_scaling_study(const nlohmann::json& j);

}  // namespace embedscope::ui
