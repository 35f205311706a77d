// `embedscope tokenize`: trains a SentencePiece model on text files, writes their token ids as a
// Megatron-style .bin (input/token_file.h) that a workload's "token_ids": {"file": ...} reads,
// and reports the fitted Zipf exponent of the token frequencies (input/zipf_fit.h).

#include <iconv.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/input/sentencepiece_tokens.h"
#include "embedscope/engine/input/token_file.h"
#include "embedscope/engine/input/zipf_fit.h"
#include "embedscope/engine/workload/spec_error.h"
#include "output_guard.h"
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
  bool overwrite = false;  // --force-overwrite: replace an existing -o / --model-out file
};

// The byte offset in the file at `path` of the first byte that is not UTF-8 text: the start of
// an invalid or truncated UTF-8 sequence (glibc's iconv from UTF-8 stops there with EILSEQ, or
// EINVAL at the end of the file) or a NUL byte (valid UTF-8, but no text has one; SentencePiece
// reads lines of text). -1 when the whole file is UTF-8 text or cannot be opened (the trainer
// names a file it cannot read). Reads 1 MiB at a time; a sequence cut by a read's end is
// completed by the next read. Throws std::runtime_error if iconv has no UTF-8 converter.
int64_t first_non_text_byte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return -1;
  iconv_t cd = iconv_open("UTF-32LE", "UTF-8");
  if (cd == reinterpret_cast<iconv_t>(-1)) throw std::runtime_error(std::string("iconv UTF-8: ") + std::strerror(errno));
  const std::unique_ptr<void, void (*)(void*)> close(cd, [](void* c) { iconv_close(static_cast<iconv_t>(c)); });
  std::vector<char> buf(size_t{1} << 20), out(size_t{4} << 20);
  size_t carried = 0;  // bytes of a sequence the previous read cut, at buf's start
  int64_t base = 0;    // the file offset of buf[0]
  for (;;) {
    in.read(buf.data() + carried, static_cast<std::streamsize>(buf.size() - carried));
    const size_t have = carried + static_cast<size_t>(in.gcount());
    if (have == 0) return -1;
    // up to the first NUL: an invalid sequence before it is the first byte that is not text
    const auto* nul = static_cast<const char*>(std::memchr(buf.data() + carried, 0, have - carried));
    char* src = buf.data();
    size_t left = nul ? static_cast<size_t>(nul - buf.data()) : have;
    while (left > 0) {
      char* dst = out.data();
      size_t room = out.size();
      if (iconv(cd, &src, &left, &dst, &room) != static_cast<size_t>(-1)) break;
      if (errno == E2BIG) continue;  // the output is scratch: convert on
      if (errno == EINVAL && in && !nul) break;  // a sequence cut by this read's end: the next completes it
      return base + (src - buf.data());  // EILSEQ, or EINVAL at the end of the file or before the NUL
    }
    if (nul) return base + (nul - buf.data());
    if (!in && left == 0) return -1;
    std::memmove(buf.data(), src, left);
    base += static_cast<int64_t>(have - left);
    carried = left;
  }
}

// What can be refused before the training's seconds of work (tester45 F6): an output that is an
// input or the other output, an existing output without --force-overwrite, a fit range of fewer
// than two ranks, input text that is empty, and an input that is not UTF-8 text (a binary file:
// tester59b F7, which the trainer took and then asked for a larger --vocab-size).
void check_tokenize_args(const TokenizeState& s) {
  refuse_output_that_is_an_input(s.output, "-o", s.inputs, "tokenize");
  refuse_output_that_is_an_input(s.model_out, "--model-out", s.inputs, "tokenize");
  if (!s.model_out.empty() &&
      std::filesystem::weakly_canonical(s.model_out) == std::filesystem::weakly_canonical(s.output))
    throw es::SpecError(fmt::format("--model-out {}: is the -o file too; give the model and the ids two names", s.model_out));
  refuse_existing_output(s.output, "-o", s.overwrite, "tokenize");
  refuse_existing_output(s.model_out, "--model-out", s.overwrite, "tokenize");
  if (s.fit_last != 0 && s.fit_last < s.fit_first + 1)
    throw es::SpecError(fmt::format("--fit-first-rank {} / --fit-last-rank {}: the fit needs at least two ranks "
                                    "(first < last, or last 0: the last id that occurs)", s.fit_first, s.fit_last));
  std::uintmax_t text_bytes = 0;
  for (const auto& in : s.inputs) {
    // a missing, unreadable or directory input said here with the reason, before any training
    std::error_code ec;
    const auto st = std::filesystem::status(in, ec);
    if (ec || !std::filesystem::exists(st))
      throw es::SpecError(fmt::format("--input {}: cannot open the text file: {}", in, ec ? ec.message() : std::strerror(ENOENT)));
    if (std::filesystem::is_directory(st)) throw es::SpecError(fmt::format("--input {}: is a directory, not a text file", in));
    if (::access(in.c_str(), R_OK) != 0)
      throw es::SpecError(fmt::format("--input {}: cannot open the text file: {}", in, std::strerror(errno)));
    const auto n = std::filesystem::file_size(in, ec);
    if (ec) return;  // not a regular file (a pipe): the trainer reads it
    text_bytes += n;
  }
  if (text_bytes == 0)
    throw es::SpecError(fmt::format("--input {}: the input text is empty (nothing to train on)", fmt::join(s.inputs, ", ")));
  for (const auto& in : s.inputs)
    if (const int64_t at = first_non_text_byte(in); at >= 0)
      throw es::SpecError(fmt::format("{}: not UTF-8 text (byte offset {})", in, at));
  // the outputs' missing folders, as run -o makes its own (made before the training, so that a
  // name that cannot be written is said before its seconds of work)
  make_output_folder(s.output, "-o");
  if (!s.model_out.empty()) make_output_folder(s.model_out, "--model-out");
}

int cmd_tokenize(const TokenizeState& s) {
  check_tokenize_args(s);
  const es::SentencePieceType type = s.model_type == "unigram" ? es::SentencePieceType::unigram : es::SentencePieceType::bpe;
  const es::TokenizedCorpus c = es::train_and_encode(s.inputs, type, s.vocab_size);
  // Megatron's preprocess_data.py: uint16 while the ids fit (its best_fitting_dtype), else wider.
  es::TokenDtype dtype = c.vocab_size <= 65536 ? es::TokenDtype::uint16 : es::TokenDtype::uint32;
  if (s.dtype == "uint16") dtype = es::TokenDtype::uint16;
  if (s.dtype == "uint32") dtype = es::TokenDtype::uint32;
  if (dtype == es::TokenDtype::uint16 && c.vocab_size > 65536)
    throw es::SpecError(fmt::format("--dtype uint16: the model has {} pieces, ids up to {} need uint32", c.vocab_size,
                                    c.vocab_size - 1));
  // fitted before anything is written: a range past the distinct ids leaves no file behind
  const es::ZipfFit f = [&] {
    const std::vector<int64_t> counts = es::token_counts(c.ids, c.vocab_size);
    // said in the flags' terms, before fit_zipf's own (tester47 F14.4: "fit_zipf: ... got ranks 5000..882")
    const auto distinct = static_cast<int64_t>(std::count_if(counts.begin(), counts.end(), [](int64_t v) { return v > 0; }));
    if (s.fit_first + 1 > distinct)
      throw es::SpecError(fmt::format("--fit-first-rank {}: the tokens hold {} distinct id(s), so the fit has {} rank(s) "
                                      "from there; it needs two (give a first rank of at most {})",
                                      s.fit_first, distinct, std::max<int64_t>(0, distinct - s.fit_first + 1),
                                      std::max<int64_t>(1, distinct - 1)));
    try {
      return es::fit_zipf(counts, s.fit_first, s.fit_last);
    } catch (const std::invalid_argument& e) {
      throw es::SpecError(fmt::format("--fit-first-rank / --fit-last-rank: {}", e.what()));
    }
  }();
  // again as the files are written: a run may have started on one of the names since (tester54 F1)
  refuse_existing_output(s.output, "-o", s.overwrite, "tokenize");
  refuse_existing_output(s.model_out, "--model-out", s.overwrite, "tokenize");
  es::write_token_bin(s.output, c.ids, dtype);
  if (!s.model_out.empty()) {
    std::ofstream m(s.model_out, std::ios::binary | std::ios::trunc);
    m.write(c.serialized_model.data(), static_cast<std::streamsize>(c.serialized_model.size()));
    if (!m) throw es::SpecError(fmt::format("--model-out {}: cannot write the SentencePiece model", s.model_out));
  }
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
             "r^2 = {:.3f}{} (the workloads' default alpha is 1.0)\n",
             f.first_rank, f.last_rank, f.distinct, f.alpha, f.r_squared,
             // a line through two points fits them exactly: r^2 1 says nothing (tester47 F14.4)
             f.last_rank - f.first_rank + 1 == 2 ? " (2 ranks: any line fits two points exactly; not evidence of a Zipf law)"
                                                 : "");
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
  t->add_option("-o,--output", s->output, "The token-id .bin to write")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "give the token-id .bin to write"); }, "NAME"))
      ->required();
  t->add_option("--dtype", s->dtype, "auto (uint16 while the ids fit, as Megatron), uint16 or uint32")
      ->check(CLI::IsMember({"auto", "uint16", "uint32"}));
  t->add_option("--model-out", s->model_out, "Also write the trained SentencePiece .model here")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "leave --model-out out to write no model"); }, "NAME"));
  t->add_option("--fit-first-rank", s->fit_first, "First rank of the Zipf fit (default 1)")
      ->check(kInteger)->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  t->add_option("--fit-last-rank", s->fit_last, "Last rank of the Zipf fit (default 0: the last id that occurs)")
      ->check(kInteger)->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  t->add_flag("--force-overwrite", s->overwrite, "Replace an existing -o / --model-out file");
  t->add_flag("--json", s->json, "Print the result as JSON");
  return {t, [s] { return cmd_tokenize(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
