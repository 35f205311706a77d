#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

namespace embedscope::sessions::pickle {

// ---- Value ---------------------------------------------------------------------------------

Value::Payload::~Payload() {
  // Children held only here are moved onto a heap stack and freed one at a time; each of them
  // then runs this destructor with its own children already moved out, so the recursion is
  // one level deep whatever the nesting. Shared children (memo references) are only released.
  std::vector<std::shared_ptr<Payload>> pending;
  auto take = [&pending](Payload& p) {
    for (Value& v : p.items)
      if (v.payload_ && v.payload_.use_count() == 1) pending.push_back(std::move(v.payload_));
    for (auto& [key, value] : p.pairs) {
      if (key.payload_ && key.payload_.use_count() == 1) pending.push_back(std::move(key.payload_));
      if (value.payload_ && value.payload_.use_count() == 1) pending.push_back(std::move(value.payload_));
    }
  };
  take(*this);
  while (!pending.empty()) {
    std::shared_ptr<Payload> p = std::move(pending.back());
    pending.pop_back();
    take(*p);
  }  // p freed here, childless
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.scalar_.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.scalar_.i = i;
  return v;
}
Value Value::unsigned_integer(uint64_t u) {
  Value v;
  v.kind_ = Kind::unsigned_integer;
  v.scalar_.u = u;
  return v;
}
Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::floating;
  v.scalar_.d = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::string;
  v.payload_ = std::make_shared<Payload>();
  v.payload_->text = std::move(s);
  return v;
}
Value Value::bytes(std::string b) {
  Value v = string(std::move(b));
  v.kind_ = Kind::bytes;
  return v;
}
Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::list;
  v.payload_ = std::make_shared<Payload>();
  v.payload_->items = std::move(items);
  return v;
}
Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::tuple;
  return v;
}
Value Value::dict(Dict items) {
  Value v;
  v.kind_ = Kind::dict;
  v.payload_ = std::make_shared<Payload>();
  v.payload_->pairs = std::move(items);
  return v;
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::floating: return scalar_.d;
    case Kind::integer: return static_cast<double>(scalar_.i);
    case Kind::unsigned_integer: return static_cast<double>(scalar_.u);
    case Kind::boolean: return scalar_.b ? 1.0 : 0.0;
    default: return 0.0;
  }
}

const std::string& Value::as_string() const {
  static const std::string empty;
  return (kind_ == Kind::string || kind_ == Kind::bytes) ? payload_->text : empty;
}
const List& Value::items() const {
  static const List empty;
  return is_sequence() ? payload_->items : empty;
}
const Dict& Value::pairs() const {
  static const Dict empty;
  return is_dict() ? payload_->pairs : empty;
}
const Value* Value::get(std::string_view key) const {
  if (!is_dict()) return nullptr;
  const auto& p = payload_->pairs;
  for (auto it = p.rbegin(); it != p.rend(); ++it)
    if (it->first.kind_ == Kind::string && it->first.payload_->text == key) return &it->second;
  return nullptr;
}
List* Value::mutable_items() { return is_sequence() ? &payload_->items : nullptr; }
Dict* Value::mutable_pairs() { return is_dict() ? &payload_->pairs : nullptr; }
const void* Value::identity() const { return (is_sequence() || is_dict()) ? payload_.get() : nullptr; }

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "bool";
    case Kind::integer:
    case Kind::unsigned_integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::bytes: return "bytes";
    case Kind::list: return "list";
    case Kind::tuple: return "tuple";
    case Kind::dict: return "dict";
  }
  return "?";
}

// ---- opcodes -------------------------------------------------------------------------------

namespace {

struct OpName {
  unsigned char code;
  const char* name;
  bool refused;  // imports or calls Python objects, or out-of-band buffers
};
constexpr OpName kOps[] = {
    {0x80, "PROTO", false}, {0x95, "FRAME", false}, {'(', "MARK", false}, {'.', "STOP", false},
    {'}', "EMPTY_DICT", false}, {'d', "DICT", false}, {'s', "SETITEM", false}, {'u', "SETITEMS", false},
    {']', "EMPTY_LIST", false}, {'l', "LIST", false}, {'a', "APPEND", false}, {'e', "APPENDS", false},
    {')', "EMPTY_TUPLE", false}, {'t', "TUPLE", false}, {0x85, "TUPLE1", false}, {0x86, "TUPLE2", false},
    {0x87, "TUPLE3", false}, {'p', "PUT", false}, {'q', "BINPUT", false}, {'r', "LONG_BINPUT", false},
    {0x94, "MEMOIZE", false}, {'g', "GET", false}, {'h', "BINGET", false}, {'j', "LONG_BINGET", false},
    {'J', "BININT", false}, {'K', "BININT1", false}, {'M', "BININT2", false}, {0x8a, "LONG1", false},
    {0x8b, "LONG4", false}, {'G', "BINFLOAT", false}, {0x8c, "SHORT_BINUNICODE", false},
    {'X', "BINUNICODE", false}, {0x8d, "BINUNICODE8", false}, {'C', "SHORT_BINBYTES", false},
    {'B', "BINBYTES", false}, {0x96, "BYTEARRAY8", false}, {'N', "NONE", false}, {0x88, "NEWTRUE", false},
    {0x89, "NEWFALSE", false},
    // refused
    {'c', "GLOBAL", true}, {0x93, "STACK_GLOBAL", true}, {'R', "REDUCE", true}, {'b', "BUILD", true},
    {'i', "INST", true}, {'o', "OBJ", true}, {0x81, "NEWOBJ", true}, {0x92, "NEWOBJ_EX", true},
    {0x82, "EXT1", true}, {0x83, "EXT2", true}, {0x84, "EXT4", true}, {'P', "PERSID", true},
    {'Q', "BINPERSID", true}, {0x97, "NEXT_BUFFER", true}, {0x98, "READONLY_BUFFER", true},
    // known to pickle, not to this subset
    {'I', "INT", false}, {'L', "LONG", false}, {'F', "FLOAT", false}, {'S', "STRING", false},
    {'T', "BINSTRING", false}, {'U', "SHORT_BINSTRING", false}, {'V', "UNICODE", false}, {'0', "POP", false},
    {'1', "POP_MARK", false}, {'2', "DUP", false}, {0x8e, "BINBYTES8", false}, {0x8f, "EMPTY_SET", false},
    {0x90, "ADDITEMS", false}, {0x91, "FROZENSET", false},
};

const OpName* op_name(unsigned char c) {
  for (const auto& o : kOps)
    if (o.code == c) return &o;
  return nullptr;
}

}  // namespace

// ---- the reader ----------------------------------------------------------------------------

class Reader {
 public:
  Reader(std::string_view data, const std::string& source, const PickleLimits& limits)
      : d_(data), source_(source), limits_(limits),
        budget_(limits.memory_factor * static_cast<int64_t>(data.size()) + (int64_t{1} << 20)) {}
  ~Reader() {
    // Refused input: break every cycle built through the memo (so nothing leaks), and free a
    // deeply nested value without recursing: every container's children move into one flat
    // list first, so no payload is destroyed while it still holds children.
    if (ok_) return;
    std::vector<Value> flat;
    for (auto& w : containers_)
      if (auto p = w.lock()) {
        for (auto& v : p->items) flat.push_back(std::move(v));
        for (auto& [k, v] : p->pairs) {
          flat.push_back(std::move(k));
          flat.push_back(std::move(v));
        }
        p->items.clear();
        p->pairs.clear();
      }
  }

  Value run() {
    while (true) {
      if (pos_ >= d_.size()) fail(pos_, "truncated: the pickle ends before its STOP opcode");
      const size_t at = pos_;
      const auto op = static_cast<unsigned char>(d_[pos_++]);
      switch (op) {
        case 0x80: {  // PROTO
          const int proto = u8(at);
          if (proto < 2 || proto > 5)
            fail(at, fmt::format("pickle protocol {} is not supported (protocols 2 to 5 are)", proto));
          break;
        }
        case 0x95: {  // FRAME: the data is contiguous; only check that the frame is there
          const uint64_t n = uint_le(8, at);
          if (n > d_.size() - pos_)
            fail(at, fmt::format("truncated: FRAME of {} bytes, but only {} bytes follow", n, d_.size() - pos_));
          break;
        }
        case '(': marks_.push_back(stack_.size()); break;
        case '.': {
          if (stack_.size() != 1 || !marks_.empty())
            fail(at, fmt::format("STOP with {} values and {} marks on the stack (expected one value)", stack_.size(),
                                 marks_.size()));
          Value v = std::move(stack_.back());
          stack_.clear();
          memo_.clear();  // the memo's references are done: a container referenced once is now held once
          sparse_memo_.clear();
          check_shape(v, at);
          ok_ = true;
          return v;
        }
        case '}': push(container(Value::dict()), at); break;
        case ']': push(container(Value::list()), at); break;
        case ')': push(container(Value::tuple()), at); break;
        case 'd': {
          const size_t m = pop_mark(at, "DICT");
          if ((stack_.size() - m) % 2) fail(at, "DICT with an odd number of items");
          Value v = container(Value::dict());
          for (size_t k = m; k < stack_.size(); k += 2) v.mutable_pairs()->emplace_back(stack_[k], stack_[k + 1]);
          stack_.resize(m);
          push(std::move(v), at);
          break;
        }
        case 'l':
        case 't': {
          const size_t m = pop_mark(at, op == 'l' ? "LIST" : "TUPLE");
          Value v = container(op == 'l' ? Value::list() : Value::tuple());
          v.mutable_items()->assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          push(std::move(v), at);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {
          const size_t n = op - 0x84u;
          need_stack(n, at, "TUPLE" + std::to_string(n));
          Value v = container(Value::tuple());
          v.mutable_items()->assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(std::move(v), at);
          break;
        }
        case 's': {
          need_stack(3, at, "SETITEM");
          Dict* d = stack_[stack_.size() - 3].mutable_pairs();
          if (!d) fail(at, fmt::format("SETITEM on a {}, not a dict", kind_at(stack_.size() - 3)));
          d->emplace_back(std::move(stack_[stack_.size() - 2]), std::move(stack_.back()));
          stack_.resize(stack_.size() - 2);
          break;
        }
        case 'u': {
          const size_t m = pop_mark(at, "SETITEMS");
          if (m == 0) fail(at, "SETITEMS without a dict below its mark");
          Dict* d = stack_[m - 1].mutable_pairs();
          if (!d) fail(at, fmt::format("SETITEMS on a {}, not a dict", kind_at(m - 1)));
          if ((stack_.size() - m) % 2) fail(at, "SETITEMS with an odd number of items");
          for (size_t k = m; k < stack_.size(); k += 2) d->emplace_back(std::move(stack_[k]), std::move(stack_[k + 1]));
          stack_.resize(m);
          break;
        }
        case 'a': {
          need_stack(2, at, "APPEND");
          List* l = list_at(stack_.size() - 2, at, "APPEND");
          l->push_back(std::move(stack_.back()));
          stack_.pop_back();
          break;
        }
        case 'e': {
          const size_t m = pop_mark(at, "APPENDS");
          if (m == 0) fail(at, "APPENDS without a list below its mark");
          List* l = list_at(m - 1, at, "APPENDS");
          for (size_t k = m; k < stack_.size(); ++k) l->push_back(std::move(stack_[k]));
          stack_.resize(m);
          break;
        }
        case 'p': put(decimal_line(at), at); break;
        case 'q': put(u8(at), at); break;
        case 'r': put(uint_le(4, at), at); break;
        case 0x94: put(memo_.size() + sparse_memo_.size(), at); break;  // len(memo), as Python's MEMOIZE
        case 'g': get(decimal_line(at), at); break;
        case 'h': get(u8(at), at); break;
        case 'j': get(uint_le(4, at), at); break;
        case 'J': push(Value::integer(static_cast<int32_t>(static_cast<uint32_t>(uint_le(4, at)))), at); break;
        case 'K': push(Value::integer(u8(at)), at); break;
        case 'M': push(Value::integer(static_cast<int64_t>(uint_le(2, at))), at); break;
        case 0x8a: push(long_int(u8(at), at), at); break;
        case 0x8b: {
          const auto n = static_cast<int32_t>(static_cast<uint32_t>(uint_le(4, at)));
          if (n < 0) fail(at, fmt::format("LONG4 with a negative length {}", n));
          push(long_int(static_cast<uint64_t>(n), at), at);
          break;
        }
        case 'G': {
          const std::string_view b = take(8, at, "BINFLOAT");
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = bits << 8 | static_cast<unsigned char>(b[k]);  // big-endian
          double v;
          std::memcpy(&v, &bits, 8);
          push(Value::floating(v), at);
          break;
        }
        case 0x8c: text(Value::Kind::string, u8(at), at, "SHORT_BINUNICODE"); break;
        case 'X': text(Value::Kind::string, uint_le(4, at), at, "BINUNICODE"); break;
        case 0x8d: text(Value::Kind::string, uint_le(8, at), at, "BINUNICODE8"); break;
        case 'C': text(Value::Kind::bytes, u8(at), at, "SHORT_BINBYTES"); break;
        case 'B': text(Value::Kind::bytes, uint_le(4, at), at, "BINBYTES"); break;
        case 0x96: text(Value::Kind::bytes, uint_le(8, at), at, "BYTEARRAY8"); break;
        case 'N': push(Value::none(), at); break;
        case 0x88: push(Value::boolean(true), at); break;
        case 0x89: push(Value::boolean(false), at); break;
        default: {
          const OpName* o = op_name(op);
          if (o && o->refused)
            fail(at, fmt::format("opcode {} ({:#04x}) refused: it {}, which a memory snapshot never needs (a pickle "
                                 "can execute code)",
                                 o->name, op,
                                 op == 0x97 || op == 0x98 ? "reads an out-of-band buffer"
                                                          : "imports or calls a Python object"));
          if (o) fail(at, fmt::format("opcode {} ({:#04x}) is not supported by this reader", o->name, op));
          fail(at, fmt::format("{:#04x} is not a pickle opcode", op));
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& why) const {
    throw PickleError(fmt::format("{}: byte {}: {}", source_, at, why), static_cast<int64_t>(at));
  }

  void charge(int64_t bytes, size_t at) {
    used_ += bytes;
    if (used_ > budget_)
      fail(at, fmt::format("the values would take more than {} bytes ({} x the {} bytes of the pickle + 1 MiB): "
                           "refused as hostile",
                           budget_, limits_.memory_factor, d_.size()));
  }

  void push(Value v, size_t at) {
    charge(static_cast<int64_t>(sizeof(Value)), at);
    stack_.push_back(std::move(v));
  }

  Value container(Value v) {
    charge(static_cast<int64_t>(sizeof(Value::Payload) + 32), pos_ - 1);
    containers_.push_back(v.payload_);
    return v;
  }

  std::string_view take(uint64_t n, size_t at, const char* what) {
    if (n > d_.size() - pos_)
      fail(at, fmt::format("truncated: {} needs {} bytes, but only {} follow{}", what, n, d_.size() - pos_,
                           n > d_.size() ? " (the length is larger than the whole file: it lies)" : ""));
    const std::string_view s = d_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  uint64_t u8(size_t at) { return static_cast<unsigned char>(take(1, at, "the opcode's argument")[0]); }
  uint64_t uint_le(int n, size_t at) {
    const std::string_view b = take(static_cast<uint64_t>(n), at, "the opcode's argument");
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = v << 8 | static_cast<unsigned char>(b[static_cast<size_t>(k)]);
    return v;
  }
  uint64_t decimal_line(size_t at) {
    const size_t nl = d_.find('\n', pos_);
    if (nl == std::string_view::npos) fail(at, "truncated: a memo index line without its newline");
    const std::string_view line = d_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    if (line.empty() || line.size() > 18 || line.find_first_not_of("0123456789") != std::string_view::npos)
      fail(at, fmt::format("bad memo index '{}'", line));
    return std::stoull(std::string(line));
  }

  void text(Value::Kind k, uint64_t n, size_t at, const char* what) {
    const std::string_view s = take(n, at, what);
    charge(static_cast<int64_t>(n + sizeof(Value::Payload)), at);
    push(k == Value::Kind::string ? Value::string(std::string(s)) : Value::bytes(std::string(s)), at);
  }

  // Little-endian two's complement of n bytes.
  Value long_int(uint64_t n, size_t at) {
    const std::string_view b = take(n, at, "LONG1/LONG4");
    if (n == 0) return Value::integer(0);
    const bool negative = static_cast<unsigned char>(b[n - 1]) & 0x80;
    // significant width: drop the sign-extension bytes at the top
    size_t width = n;
    const unsigned char ext = negative ? 0xff : 0x00;
    while (width > 1 && static_cast<unsigned char>(b[width - 1]) == ext) --width;
    uint64_t v = 0;
    for (size_t k = std::min<size_t>(width, 8); k-- > 0;) v = v << 8 | static_cast<unsigned char>(b[k]);
    if (!negative) {
      if (width <= 8) {
        if (v >> 63) return Value::unsigned_integer(v);  // [2^63, 2^64): an address above 2^63
        return Value::integer(static_cast<int64_t>(v));
      }
    } else if (width <= 8) {
      if (width < 8) v |= ~uint64_t{0} << (8 * width);  // sign-extend
      if (v >> 63) return Value::integer(static_cast<int64_t>(v));
    }
    int bits = static_cast<int>(8 * width);
    for (unsigned char top = static_cast<unsigned char>(b[width - 1]) ^ ext; bits > 0 && !(top & 0x80); top <<= 1) --bits;
    fail(at, fmt::format("integer of {} bits in a {}-byte LONG: wider than 64 bits, which no snapshot field holds",
                         bits, n));
  }

  size_t pop_mark(size_t at, const char* what) {
    if (marks_.empty()) fail(at, fmt::format("{} without a MARK", what));
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  void need_stack(size_t n, size_t at, const std::string& what) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail(at, fmt::format("{} needs {} values on the stack", what, n));
  }
  List* list_at(size_t i, size_t at, const char* what) {
    Value& v = stack_[i];
    if (v.kind() != Value::Kind::list) fail(at, fmt::format("{} to a {}, not a list", what, kind_at(i)));
    return v.mutable_items();
  }
  const char* kind_at(size_t i) const { return Value::kind_name(stack_[i].kind()); }

  void put(uint64_t idx, size_t at) {
    if (stack_.empty()) fail(at, "memo PUT with an empty stack");
    charge(static_cast<int64_t>(sizeof(Value) + 32), at);
    if (idx < memo_.size()) {
      memo_[idx] = stack_.back();
    } else if (idx == memo_.size()) {  // Python's pickler numbers its memo 0, 1, 2, ...: a vector
      sparse_memo_.erase(idx);
      memo_.push_back(stack_.back());
    } else {
      sparse_memo_[idx] = stack_.back();
    }
  }
  void get(uint64_t idx, size_t at) {
    if (idx < memo_.size()) return push(memo_[idx], at);
    auto it = sparse_memo_.find(idx);
    if (it == sparse_memo_.end()) fail(at, fmt::format("memo GET of {}, which was never PUT", idx));
    push(it->second, at);
  }

  // The finished value: no container inside itself, nesting at most max_depth (iterative, so a
  // deep hostile value cannot exhaust this stack either).
  void check_shape(const Value& root, size_t at) {
    if (!root.identity()) return;
    enum State : uint8_t { open, done };
    std::unordered_map<const void*, std::pair<State, int>> seen;  // state, height
    struct Frame {
      const Value* v;
      size_t next;
      int height;
    };
    std::vector<Frame> path{{&root, 0, 0}};
    seen[root.identity()] = {open, 0};
    auto child = [](const Value& v, size_t k) -> const Value* {
      if (v.is_dict()) {
        const Dict& p = v.pairs();
        return k / 2 < p.size() ? (k % 2 ? &p[k / 2].second : &p[k / 2].first) : nullptr;
      }
      const List& l = v.items();
      return k < l.size() ? &l[k] : nullptr;
    };
    while (!path.empty()) {
      Frame& f = path.back();
      const Value* c = child(*f.v, f.next++);
      if (!c) {
        const int h = f.height + 1;
        if (f.v == &root || f.v->payload_.use_count() > 1) seen[f.v->identity()] = {done, h};
        path.pop_back();
        if (!path.empty()) path.back().height = std::max(path.back().height, h);
        continue;
      }
      if (!c->identity()) continue;
      if (c->payload_.use_count() == 1) {  // held by this parent alone: reached once, in no cycle
        if (static_cast<int>(path.size()) >= limits_.max_depth)
          fail(at, fmt::format("containers nested deeper than {}: refused as hostile", limits_.max_depth));
        path.push_back({c, 0, 0});
        continue;
      }
      auto it = seen.find(c->identity());
      if (it != seen.end()) {
        if (it->second.first == open) fail(at, "a container contains itself (a cycle through the memo): refused");
        f.height = std::max(f.height, it->second.second);
        continue;
      }
      if (static_cast<int>(path.size()) >= limits_.max_depth)
        fail(at, fmt::format("containers nested deeper than {}: refused as hostile", limits_.max_depth));
      seen[c->identity()] = {open, 0};
      path.push_back({c, 0, 0});
    }
    if (seen[root.identity()].second > limits_.max_depth)
      fail(at, fmt::format("containers nested deeper than {}: refused as hostile", limits_.max_depth));
  }

  std::string_view d_;
  size_t pos_ = 0;
  const std::string& source_;
  PickleLimits limits_;
  int64_t budget_, used_ = 0;
  bool ok_ = false;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::vector<Value> memo_;                          ///< memo ids 0 .. size - 1
  std::unordered_map<uint64_t, Value> sparse_memo_;  ///< any other id (never one below memo_.size())
  std::vector<std::weak_ptr<Value::Payload>> containers_;
};

Value loads(std::string_view data, const std::string& source, const PickleLimits& limits) {
  if (data.empty()) throw PickleError(fmt::format("{}: empty: not a pickle", source), 0);
  Reader r(data, source, limits);
  return r.run();
}

bool is_gzip(std::string_view d) {
  return d.size() >= 2 && static_cast<unsigned char>(d[0]) == 0x1f && static_cast<unsigned char>(d[1]) == 0x8b;
}
bool is_pickle(std::string_view d) {
  return d.size() >= 2 && static_cast<unsigned char>(d[0]) == 0x80 && d[1] >= 2 && d[1] <= 5;
}

int old_pickle_protocol(std::string_view d) {
  if (d.size() < 2) return -1;
  if (d[0] == '(' && (d[1] == 'd' || d[1] == 'l')) return 0;                            // MARK DICT / LIST
  if ((d[0] == '}' || d[0] == ']') && (d[1] == 'q' || d[1] == 'r' || d[1] == '(')) return 1;  // EMPTY_DICT / EMPTY_LIST
  return -1;
}

std::string old_pickle_message(const std::string& path, int protocol) {
  return fmt::format("{}: a pickle of protocol {}; PyTorch memory snapshots are read in protocols 2-5 "
                     "(torch.cuda.memory._dump_snapshot writes 2 or later): load it in Python and pickle.dump it "
                     "again with protocol=4",
                     path, protocol);
}

std::string gunzip(std::string_view data, const std::string& source, int64_t max_inflated) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw PickleError(fmt::format("{}: zlib: cannot start inflating", source), -1);
  std::string out;
  char buf[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string why = rc == Z_BUF_ERROR ? "truncated" : (z.msg ? z.msg : "corrupt");
      inflateEnd(&z);
      throw PickleError(fmt::format("{}: gzip: {} (after {} inflated bytes)", source, why, out.size()), -1);
    }
    out.append(buf, sizeof buf - z.avail_out);
    if (static_cast<int64_t>(out.size()) > max_inflated) {
      inflateEnd(&z);
      throw PickleError(fmt::format("{}: gzip: inflates to more than {} bytes: refused", source, max_inflated), -1);
    }
  }
  inflateEnd(&z);
  return out;
}

Value load_file(const std::string& path, const PickleLimits& limits) {
  if (std::filesystem::is_directory(path)) throw PickleError(fmt::format("{}: is a directory, not a snapshot", path), -1);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw PickleError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)), -1);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string data = ss.str();
  if (is_gzip(data)) data = gunzip(data, path, limits.max_inflated);
  return loads(data, path, limits);
}

}  // namespace embedscope::sessions::pickle
