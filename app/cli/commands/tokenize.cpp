// `embedscope tokenize`: trains a SentencePiece model on text files, writes their token ids as a
// Megatron-style .bin (input/token_file.h) that a workload's "token_ids": {"file": ...} reads,
// and reports the fitted Zipf exponent of the token frequencies (input/zipf_fit.h).

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/input/sentencepiece_tokens.h"
#include "embedscope/engine/input/token_file.h"
#include "embedscope/engine/input/zipf_fit.h"
#include "embedscope/engine/workload/spec_error.h"
#include "workload_args.h"  // kInteger

namespace embedscope::cli {

namespace es = embedscope::engine;

namespace {

struct TokenizeState {
  std::string model_type = "bpe";
  int64_t vocab_size = 0;
  std::vector<std::string> inputs;
  std::string output;
  std::string dtype = "auto";
  std::string model_out;
  int64_t fit_first = 1;
  int64_t fit_last = 0;
  bool json = false;
};

int cmd_tokenize(const TokenizeState& s) {
  const es::SentencePieceType type = s.model_type == "unigram" ? es::SentencePieceType::unigram : es::SentencePieceType::bpe;
  const es::TokenizedCorpus c = es::train_and_encode(s.inputs, type, s.vocab_size);
  // Megatron's preprocess_data.py: uint16 while the ids fit (its best_fitting_dtype), else wider.
  es::TokenDtype dtype = c.vocab_size <= 65536 ? es::TokenDtype::uint16 : es::TokenDtype::uint32;
  if (s.dtype == "uint16") dtype = es::TokenDtype::uint16;
  if (s.dtype == "uint32") dtype = es::TokenDtype::uint32;
  if (dtype == es::TokenDtype::uint16 && c.vocab_size > 65536)
    throw es::SpecError(fmt::format("--dtype uint16: the model has {} pieces, ids up to {} need uint32", c.vocab_size,
                                    c.vocab_size - 1));
  es::write_token_bin(s.output, c.ids, dtype);
  if (!s.model_out.empty()) {
    std::ofstream m(s.model_out, std::ios::binary | std::ios::trunc);
    m.write(c.serialized_model.data(), static_cast<std::streamsize>(c.serialized_model.size()));
    if (!m) throw es::SpecError(fmt::format("--model-out {}: cannot write the SentencePiece model", s.model_out));
  }
  const es::ZipfFit f = [&] {
    try {
      return es::fit_zipf(es::token_counts(c.ids, c.vocab_size), s.fit_first, s.fit_last);
    } catch (const std::invalid_argument& e) {
      throw es::SpecError(fmt::format("--fit-first-rank / --fit-last-rank: {}", e.what()));
    }
  }();
  const auto bytes = static_cast<int64_t>(c.ids.size()) * es::token_dtype_bytes(dtype);
  if (s.json) {
    const nlohmann::json j = {
        {"output", s.output}, {"dtype", es::to_string(dtype)}, {"model_type", s.model_type},
        {"vocab_size_requested", s.vocab_size}, {"vocab_size", c.vocab_size}, {"tokens", c.ids.size()},
        {"eos_id", c.eos_id}, {"bytes", bytes},
        {"zipf_fit", {{"alpha", f.alpha}, {"log_c", f.log_c}, {"r_squared", f.r_squared}, {"first_rank", f.first_rank},
                      {"last_rank", f.last_rank}, {"distinct_ids", f.distinct}}}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  fmt::print("SentencePiece {}: {} pieces ({} asked), {} file(s), {} tokens (eos {} after each file)\n", s.model_type,
             c.vocab_size, s.vocab_size, s.inputs.size(), c.ids.size(), c.eos_id);
  fmt::print("wrote {} ({}, {} bytes; workload: \"token_ids\": {{\"file\": \"{}\", \"dtype\": \"{}\"}}, "
             "\"vocab_size\" >= {})\n",
             s.output, es::to_string(dtype), bytes, s.output, es::to_string(dtype), c.vocab_size);
  fmt::print("Zipf fit (least squares of ln count on ln rank, ranks {}..{} of {} distinct ids): alpha = {:.3f}, "
             "r^2 = {:.3f} (the workloads' default alpha is 1.0)\n",
             f.first_rank, f.last_rank, f.distinct, f.alpha, f.r_squared);
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto s = std::make_shared<TokenizeState>();
  auto* t = app.add_subcommand("tokenize",
                               "Train a SentencePiece model on text files and write their token ids as a .bin "
                               "(with the fitted Zipf exponent of the token frequencies)");
  t->add_option("--model-type", s->model_type, "SentencePiece model type: bpe (default) or unigram")
      ->check(CLI::IsMember({"bpe", "unigram"}));
  t->add_option("--vocab-size", s->vocab_size, "Pieces of the model (a soft limit: a small text may give fewer)")
      ->required()->check(kInteger)->check(CLI::Range(int64_t{4}, int64_t{1} << 20));
  t->add_option("--input", s->inputs, "Text files, e.g. /usr/share/common-licenses/GPL-3")->required();
  t->add_option("-o,--output", s->output, "The token-id .bin to write")->required();
  t->add_option("--dtype", s->dtype, "auto (uint16 while the ids fit, as Megatron), uint16 or uint32")
      ->check(CLI::IsMember({"auto", "uint16", "uint32"}));
  t->add_option("--model-out", s->model_out, "Also write the trained SentencePiece .model here");
  t->add_option("--fit-first-rank", s->fit_first, "First rank of the Zipf fit (default 1)")
      ->check(kInteger)->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  t->add_option("--fit-last-rank", s->fit_last, "Last rank of the Zipf fit (default 0: the last id that occurs)")
      ->check(kInteger)->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  t->add_flag("--json", s->json, "Print the result as JSON");
  return {t, [s] { return cmd_tokenize(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
