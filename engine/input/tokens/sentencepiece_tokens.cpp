// train_and_encode (input/sentencepiece_tokens.h) through libsentencepiece.

#include "embedscope/engine/workload/read_file.h"
#include "embedscope/engine/input/sentencepiece_tokens.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

namespace {

std::string read_text_file(const std::string& path) { return read_whole_file(path, "--input ", "text file"); }

}  // namespace

TokenizedCorpus train_and_encode(const std::vector<std::string>& inputs, SentencePieceType type, int64_t vocab_size) {
  if (vocab_size < 4) throw SpecError(fmt::format("--vocab-size must be >= 4 (3 control pieces + 1), got {}", vocab_size));
  if (inputs.empty()) throw SpecError("--input: at least one text file");
  std::vector<std::string> texts;
  for (const std::string& p : inputs) texts.push_back(read_text_file(p));  // names the missing file first
  std::string joined;
  for (const std::string& p : inputs) joined += (joined.empty() ? "" : ",") + p;
  const std::unordered_map<std::string, std::string> args = {
      {"input", joined},
      {"model_type", type == SentencePieceType::bpe ? "bpe" : "unigram"},
      {"vocab_size", std::to_string(vocab_size)},
      {"character_coverage", "1.0"},
      {"hard_vocab_limit", "false"},
      {"num_threads", "1"},
      {"minloglevel", "2"},
      {"model_prefix", ""},
  };
  TokenizedCorpus out;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &out.serialized_model);
  if (!st.ok()) throw SpecError(fmt::format("SentencePiece training failed: {}", st.ToString()));
  sentencepiece::SentencePieceProcessor sp;
  const auto ls = sp.LoadFromSerializedProto(out.serialized_model);
  if (!ls.ok()) throw SpecError(fmt::format("SentencePiece model does not load: {}", ls.ToString()));
  out.vocab_size = sp.GetPieceSize();
  out.eos_id = sp.eos_id();
  for (const std::string& text : texts) {
    size_t begin = 0;
    while (begin < text.size()) {  // line by line, as the trainer read it
      size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      for (int id : sp.EncodeAsIds(std::string_view(text).substr(begin, end - begin))) out.ids.push_back(id);
      begin = end + 1;
    }
    out.ids.push_back(out.eos_id);
  }
  return out;
}

}  // namespace embedscope::engine
