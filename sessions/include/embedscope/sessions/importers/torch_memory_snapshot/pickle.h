#pragma once
// A native reader of the pickle subset that PyTorch CUDA memory snapshots use
// (torch.cuda.memory._dump_snapshot: a dict of lists, dicts, tuples, ints, floats, strings,
// bools and None), so no Python is needed at run time. Protocols 2 to 5.
//
// Opcodes read: PROTO, FRAME, MARK, STOP; EMPTY_DICT, DICT, SETITEM, SETITEMS, EMPTY_LIST,
// LIST, APPEND, APPENDS, EMPTY_TUPLE, TUPLE, TUPLE1, TUPLE2, TUPLE3; PUT, BINPUT, LONG_BINPUT,
// MEMOIZE, GET, BINGET, LONG_BINGET; BININT, BININT1, BININT2, LONG1, LONG4; BINFLOAT;
// SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, SHORT_BINBYTES, BINBYTES, BYTEARRAY8; NONE,
// NEWTRUE, NEWFALSE. (Python's pickle.dumps of such data uses nothing else, see pickletools.)
//
// Refused, with PickleError naming the opcode and its byte offset: GLOBAL, STACK_GLOBAL,
// REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID, NEXT_BUFFER,
// READONLY_BUFFER (they import or call Python objects: a pickle can execute code, and a
// memory snapshot never needs it); every other opcode as "not supported".
//
// Integers: LONG1 / LONG4 are little-endian two's complement of any width. Values in
// [-2^63, 2^63) are Kind::integer; values in [2^63, 2^64) (device addresses above 2^63, which
// Python writes as 9 bytes with a zero sign byte) are Kind::unsigned_integer, exact; anything
// wider is refused ("integer of N bits ... wider than 64 bits").
//
// Hostile input is bounded:
//  - nesting: a value nested deeper than PickleLimits::max_depth (containers in containers,
//    counted on the finished value, memo references included) is refused; a container that
//    contains itself (built through the memo) is refused. Consumers may recurse on the result.
//  - memory: every value costs its fixed size plus its payload (a container 144 bytes, the worst
//    case being one container per input byte); the reader refuses input whose values would
//    exceed PickleLimits::memory_factor (160) x the pickle's size + 1 MiB (vector growth may
//    take up to twice the accounted bytes for list and dict items). Memo
//    references share payloads (GET never copies a string or list), so the bound holds for
//    "billion laughs" pickles. Lengths are checked against the bytes left before anything is
//    allocated (a length that lies is an error, not a 2 GiB allocation).
//  - gzip input (starts 1f 8b) is inflated with zlib first, up to PickleLimits::max_inflated
//    bytes; the memory bound then applies to the inflated size.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embedscope/sessions/store/session.h"  // SessionError

namespace embedscope::sessions::pickle {

/// A pickle that cannot be read. what() names the source, the byte offset and the problem, e.g.
/// "x.pickle: byte 2: opcode GLOBAL (0x63) refused: it imports a Python object, which a memory
/// snapshot never needs (a pickle can execute code)". `offset` is that byte offset (in the
/// inflated bytes for gzip input), -1 when none applies. A SessionError: bad input (exit 2).
class PickleError : public SessionError {
 public:
  PickleError(const std::string& msg, int64_t offset) : SessionError(msg), offset(offset) {}
  int64_t offset;
};

class Value;
class Reader;
using List = std::vector<Value>;
/// Key / value pairs in insertion order (a later SETITEM of the same key wins in get()).
using Dict = std::vector<std::pair<Value, Value>>;

/// One unpickled value. Cheap to copy: strings, bytes and containers are shared (as Python's
/// objects are between the memo and their containers).
class Value {
 public:
  enum class Kind { none, boolean, integer, unsigned_integer, floating, string, bytes, list, tuple, dict };

  Value() = default;
  static Value none() { return Value(); }
  static Value boolean(bool b);
  static Value integer(int64_t v);
  /// A value in [2^63, 2^64).
  static Value unsigned_integer(uint64_t v);
  static Value floating(double v);
  static Value string(std::string s);
  static Value bytes(std::string b);
  static Value list(List items = {});
  static Value tuple(List items = {});
  static Value dict(Dict items = {});

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::none; }
  /// integer or unsigned_integer.
  bool is_int() const { return kind_ == Kind::integer || kind_ == Kind::unsigned_integer; }
  bool is_string() const { return kind_ == Kind::string; }
  /// list or tuple.
  bool is_sequence() const { return kind_ == Kind::list || kind_ == Kind::tuple; }
  bool is_dict() const { return kind_ == Kind::dict; }

  bool as_bool() const { return scalar_.b; }
  /// integer (bool reads 0/1). Undefined for other kinds: check kind() first.
  int64_t as_int() const { return kind_ == Kind::boolean ? (scalar_.b ? 1 : 0) : scalar_.i; }
  /// The bit pattern as unsigned: exact for unsigned_integer and non-negative integer.
  uint64_t as_uint() const { return kind_ == Kind::unsigned_integer ? scalar_.u : static_cast<uint64_t>(scalar_.i); }
  /// floating, or an integer converted.
  double as_double() const;
  /// string or bytes; "" otherwise.
  const std::string& as_string() const;
  /// list or tuple items; empty otherwise.
  const List& items() const;
  /// dict pairs; empty otherwise.
  const Dict& pairs() const;
  /// The value of the last pair whose key is the string `key`, or nullptr (also for non-dicts).
  const Value* get(std::string_view key) const;

  /// Mutable access for the reader (list / tuple / dict); nullptr for other kinds.
  List* mutable_items();
  Dict* mutable_pairs();
  /// Identity of a shared container (nullptr for scalars and strings).
  const void* identity() const;

  /// Kind as a word: "None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict".
  static const char* kind_name(Kind k);

 private:
  struct Payload {
    std::string text;
    List items;
    Dict pairs;
    /// Releases nested containers iteratively: a value nested a million deep (which the reader
    /// builds before its depth check refuses it) must not take a million stack frames to free.
    ~Payload();
  };
  Kind kind_ = Kind::none;
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
  } scalar_{};
  std::shared_ptr<Payload> payload_;  ///< string, bytes, list, tuple, dict
  friend class Reader;
};

struct PickleLimits {
  int max_depth = 200;                        ///< containers nested in containers
  int64_t memory_factor = 160;                ///< values may take this many bytes per pickle byte
  int64_t max_inflated = int64_t{8} << 30;    ///< gzip: at most this many bytes after inflating
};

/// Reads one pickle (up to STOP) from `data`. `source` prefixes every error (a file name).
/// Throws PickleError. Trailing bytes after STOP are ignored, as pickle.loads does.
Value loads(std::string_view data, const std::string& source = "pickle", const PickleLimits& limits = {});

/// True when `data` starts like gzip (1f 8b).
bool is_gzip(std::string_view data);
/// True when `data` starts like a pickle of protocol 2..5 (0x80, then the protocol byte).
bool is_pickle(std::string_view data);
/// 0 or 1 when `data` starts like a pickle of protocol 0 or 1 holding a dict or list (what a
/// snapshot would be; those protocols have no 0x80 PROTO header: protocol 0 starts "(d" / "(l",
/// protocol 1 "}" / "]" followed by a memo or MARK opcode), else -1. No JSON text starts so.
int old_pickle_protocol(std::string_view data);
/// The message for a pickle of an old protocol (`protocol` 0 or 1) that should be a snapshot:
/// "PATH: a pickle of protocol 0; PyTorch memory snapshots are read in protocols 2-5 ...".
std::string old_pickle_message(const std::string& path, int protocol);

/// Inflates gzip `data` with zlib; PickleError naming `source` for corrupt or truncated data or
/// more than `max_inflated` bytes.
std::string gunzip(std::string_view data, const std::string& source, int64_t max_inflated);

/// Reads a file: gzip is inflated, then loads(). PickleError names the file (also when it
/// cannot be opened).
Value load_file(const std::string& path, const PickleLimits& limits = {});

}  // namespace embedscope::sessions::pickle
