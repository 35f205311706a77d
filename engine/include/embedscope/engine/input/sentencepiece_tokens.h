#pragma once
// Realistic token ids (issue 19): a SentencePiece model (Kudo & Richardson 2018, Debian
// libsentencepiece-dev) trained on text files - license texts under /usr/share/common-licenses
// are on every Debian machine - and the files encoded with it, for `embedscope tokenize`.

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::engine {

/// SentencePiece's --model_type: byte-pair encoding (Sennrich et al. 2016) or the unigram
/// language model (Kudo 2018).
enum class SentencePieceType { bpe, unigram };

struct TokenizedCorpus {
  std::vector<int64_t> ids;       ///< every input file's ids in order, each followed by eos_id
  int64_t vocab_size = 0;         ///< pieces in the trained model (ids are in [0, vocab_size))
  int64_t eos_id = 2;             ///< SentencePiece's </s> (unk 0, bos 1, eos 2: its defaults)
  std::string serialized_model;   ///< the ModelProto, as a .model file holds it
};

/// Trains a model of `type` with `vocab_size` pieces on the lines of `inputs` and encodes the
/// same files. SentencePiece's options: character_coverage 1.0, hard_vocab_limit false (a
/// small text may give fewer pieces than asked: TokenizedCorpus::vocab_size says how many),
/// num_threads 1, logging off - so the same text gives the same ids. SpecError
/// naming the file that cannot be read, or SentencePiece's message when training fails
/// (vocab_size < 4 included: SpecError "--vocab-size must be >= 4").
TokenizedCorpus train_and_encode(const std::vector<std::string>& inputs, SentencePieceType type, int64_t vocab_size);

}  // namespace embedscope::engine
