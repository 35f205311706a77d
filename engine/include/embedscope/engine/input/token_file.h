#pragma once
// Token-id files (issue 19): the flat arrays that LLM data pipelines store tokenized text in, read
// into int64 ids and written back. Two layouts:
//  - Megatron-LM's .bin: the token ids of every document back to back, little-endian, one dtype
//    for the file (Megatron's indexed dataset, megatron/core/datasets/indexed_dataset.py; its
//    preprocess_data.py picks uint16 when the vocabulary has < 65,500 ids). Megatron keeps the
//    document boundaries in a sibling .idx file; Embedscope reads and writes the .bin alone (the
//    documents are separated by an end-of-document id in the stream, as with --append-eod).
//  - NumPy .npy (format 1.0 / 2.0 / 3.0, numpy.lib.format): a 1-D C-order array of <u2, <u4,
//    <i4 or <i8; the header is parsed here (a Python dict literal of descr, fortran_order, shape).
// Errors are engine::SpecError naming the file and, for a bad id, its element offset.

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::engine {

/// Element types of a token file. .bin files take uint16 or uint32 (the dtype is not stored in
/// the file: the workload says it); .npy files say theirs (any of the four).
enum class TokenDtype { uint16, uint32, int32, int64 };
/// "uint16", "uint32", "int32", "int64".
const char* to_string(TokenDtype t);
/// Bytes per element: 2, 4, 4, 8.
int token_dtype_bytes(TokenDtype t);

/// The ids of a raw little-endian .bin file of `dtype` (uint16 or uint32), in file order.
/// SpecError "<path>: cannot open ..." when unreadable, "<path>: size N bytes is not a multiple
/// of the 2-byte uint16" when truncated, "<path>: no token ids" when empty, and for dtype int32 /
/// int64 ("a .bin file holds uint16 or uint32").
std::vector<int64_t> read_token_bin(const std::string& path, TokenDtype dtype);

/// The ids of a 1-D .npy file of dtype <u2, <u4, <i4 or <i8 ('=' for the byte order accepted).
/// SpecError naming the file and what is wrong: not an .npy (magic), an unsupported version,
/// descr (big-endian, float, ...), fortran_order true, a shape that is not 1-D, a data size that
/// does not match the shape, a negative id (with its offset), or no ids. `declared` / `descr`
/// (when given) receive the dtype the file's header declares and its descr as written ("<u4").
std::vector<int64_t> read_token_npy(const std::string& path, TokenDtype* declared = nullptr,
                                    std::string* descr = nullptr);

/// read_token_npy when `path` ends in ".npy", else read_token_bin(path, dtype).
std::vector<int64_t> read_token_file(const std::string& path, TokenDtype dtype);

/// Throws SpecError "<path>: token id <id> at offset <i> (byte <i x bytes>) is >= vocab_size <V>"
/// for the first id outside [0, vocab_size); `path` is the file the message names.
void check_token_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& path,
                     TokenDtype dtype);

/// Writes `ids` as a raw little-endian .bin of `dtype` (uint16 or uint32). SpecError naming the
/// file when it cannot be written, or an id does not fit the dtype (with its offset).
void write_token_bin(const std::string& path, const std::vector<int64_t>& ids, TokenDtype dtype);

}  // namespace embedscope::engine
