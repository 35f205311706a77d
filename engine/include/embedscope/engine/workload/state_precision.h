#pragma once
// Warnings for optimizer state kept in fp16 (TableSpec::optimizer_state_type), whose range is
// too small for the values the state holds: a valid workload, but one that loses accuracy, so
// `run` and `plan` say so before they start (docs/configuration.md, optimizer_state_type).

#include <string>
#include <vector>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// One warning per optimizer whose fp16 state underflows, naming the first table's JSON pointer
/// and every fp16 table; empty when no table keeps fp16 state (bf16 keeps fp32's exponent range
/// and is never warned about; sgd keeps no state and fp16 is refused there by validate).
/// The magnitudes (fp16: smallest normal 2^-14 = 6.1e-5, values under 2^-25 = 3.0e-8 round to 0):
///   rowwise_adagrad: the state is a row's running sum of mean g^2 (kernels' update_row,
///     FBGEMM's momentum1); a gradient of a loss averaged over the batch is ~1e-4..1e-3 an
///     element for a row a few samples touch, so g^2 ~ 1e-8..1e-6: under fp16's smallest normal
///     for g below ~7.8e-3 (kept to 2^-24 = 6e-8 absolute: 30% of 2e-7), and rounded to 0 for g
///     below ~1.7e-4, after which the row's next step divides by the square root of its new g^2
///     alone and moves each element by about the learning rate, as a first step does, instead of
///     adagrad's decaying step;
///   adam: momentum2 = 0.001 g^2 (beta2 0.999) falls under the smallest normal for g below ~0.25
///     and keeps only 6e-8 absolute.
/// Example: tables "cold_0" (index 0) and "hot_0" in fp16 with rowwise_adagrad ->
///   "/tables/0/optimizer_state_type: fp16 (tables \"cold_0\", \"hot_0\") with /optimizer/type
///   rowwise_adagrad: ..." (the full text is tested).
std::vector<std::string> state_precision_warnings(const WorkloadSpec& spec);

}  // namespace embedscope::engine
