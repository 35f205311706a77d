#include "importers/kineto_json/framing.h"

#include <immintrin.h>  // SSE2 (part of x86-64); AVX2 where the CPU has it (checked at run time)

#include <cstdint>
#include <cstring>
#include <string_view>

namespace embedscope::sessions::importers::kineto {

namespace {
constexpr size_t npos = static_cast<size_t>(-1);

/// One bit per byte of a 64-byte block (bit i: byte i).
struct BlockBits {
  uint64_t quote = 0, backslash = 0, newline = 0, open = 0, close = 0;  ///< '"', '\\', '\n', '{' or '[', '}' or ']'
};

/// Classifies the 64 bytes at `b` with SSE2 compares ('{' | 0x20 == '[' | 0x20, and so for the
/// closing brackets: one compare finds both).
BlockBits classify(const char* b) {
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), newline = _mm_set1_epi8('\n'),
                open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'), case_bit = _mm_set1_epi8(0x20);
  BlockBits m;
  for (int i = 0; i < 4; ++i) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * i));
    const __m128i folded = _mm_or_si128(v, case_bit);
    auto bits = [&](__m128i eq) { return static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(eq))) << (16 * i); };
    m.quote |= bits(_mm_cmpeq_epi8(v, quote));
    m.backslash |= bits(_mm_cmpeq_epi8(v, backslash));
    m.newline |= bits(_mm_cmpeq_epi8(v, newline));
    m.open |= bits(_mm_cmpeq_epi8(folded, open));
    m.close |= bits(_mm_cmpeq_epi8(folded, close));
  }
  return m;
}

/// The bytes of the 64-byte block (lo, hi) equal to c's, as 64 bits. AVX2 only.
__attribute__((target("avx2"))) inline uint64_t equal_bits(__m256i lo, __m256i hi, __m256i c) {
  return static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, c)))) |
         static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, c)))) << 32;
}

/// classify() with 32-byte AVX2 compares (two per character class instead of four). Only
/// called where the CPU has AVX2.
__attribute__((target("avx2"))) BlockBits classify_avx2(const char* b) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
  const __m256i case_bit = _mm256_set1_epi8(0x20);
  const __m256i lo_folded = _mm256_or_si256(lo, case_bit), hi_folded = _mm256_or_si256(hi, case_bit);
  BlockBits m;
  m.quote = equal_bits(lo, hi, _mm256_set1_epi8('"'));
  m.backslash = equal_bits(lo, hi, _mm256_set1_epi8('\\'));
  m.newline = equal_bits(lo, hi, _mm256_set1_epi8('\n'));
  m.open = equal_bits(lo_folded, hi_folded, _mm256_set1_epi8('{'));
  m.close = equal_bits(lo_folded, hi_folded, _mm256_set1_epi8('}'));
  return m;
}

/// Bit i = the xor of bits 0..i of x: with x the quotes of a block, the bytes from an opening
/// quote up to (not including) its closing quote.
uint64_t prefix_xor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

/// Scanner::value_end() of the object or array at t[p] (text of n bytes), 64 bytes at a time:
/// the same result (and the same `broken`) as the byte loop, which it hands over to
/// (`handed_over` true) for a value with a backslash before its end (the byte loop's escapes
/// are the definition). About 8x faster than the byte loop on torch.profiler's short strings.
template <BlockBits (*Classify)(const char*)>
inline __attribute__((always_inline)) size_t container_end_blocks(const char* t, size_t n, size_t p, bool& handed_over,
                                                                 size_t& broken) {
  handed_over = false;
  int64_t depth = 0;
  uint64_t in_string = 0;  // all ones when the previous block ended inside a string
  alignas(32) char last[64];
  for (size_t b = p; b < n; b += 64) {
    const char* block = t + b;
    uint64_t valid = ~uint64_t{0};
    if (n - b < 64) {  // never read past the text: the tail is copied, zero-filled
      std::memset(last, 0, sizeof last);
      std::memcpy(last, t + b, n - b);
      block = last;
      valid = (uint64_t{1} << (n - b)) - 1;
    }
    const BlockBits m = Classify(block);
    if (m.backslash & valid) {
      handed_over = true;
      return npos;
    }
    const uint64_t strings = prefix_xor(m.quote & valid) ^ in_string;
    in_string = static_cast<uint64_t>(static_cast<int64_t>(strings) >> 63);
    uint64_t structural = (m.open | m.close) & valid & ~strings;
    const uint64_t bad = m.newline & valid & strings;  // a raw line break inside a string
    const int first_bad = bad ? __builtin_ctzll(bad) : 64;
    while (structural) {
      const int i = __builtin_ctzll(structural);
      if (first_bad < i) break;
      if ((m.open >> i) & 1) ++depth;
      else if (--depth == 0) return b + static_cast<size_t>(i) + 1;
      structural &= structural - 1;
    }
    if (bad) {
      broken = b + static_cast<size_t>(first_bad);
      return npos;
    }
  }
  return npos;
}

size_t container_end_sse2(const char* t, size_t n, size_t p, bool& handed_over, size_t& broken) {
  return container_end_blocks<classify>(t, n, p, handed_over, broken);
}

__attribute__((target("avx2"), flatten)) size_t container_end_avx2(const char* t, size_t n, size_t p, bool& handed_over,
                                                                   size_t& broken) {
  return container_end_blocks<classify_avx2>(t, n, p, handed_over, broken);
}

const bool kHaveAvx2 = __builtin_cpu_supports("avx2");

struct Scanner {
  const char* t;
  size_t n;
  /// Where a string was found to hold a raw line break (JSON strings never do: an unescaped
  /// quote or a trailing backslash made the quotes pair wrongly); npos when none.
  mutable size_t broken = npos;

  size_t ws(size_t p) const {
    while (p < n && (t[p] == ' ' || t[p] == '\n' || t[p] == '\r' || t[p] == '\t')) ++p;
    return p;
  }
  /// p at '"': the position after the closing quote, npos at the end of the text or when the
  /// string holds a raw line break (`broken` says where).
  size_t string_end(size_t p) const {
    const size_t open = ++p;
    for (;;) {
      const void* q = std::memchr(t + p, '"', n - p);
      if (!q) {
        if (const void* nl = std::memchr(t + open, '\n', n - open))
          broken = static_cast<size_t>(static_cast<const char*>(nl) - t);
        return npos;
      }
      size_t e = static_cast<size_t>(static_cast<const char*>(q) - t);
      size_t bs = 0;  // an odd run of backslashes escapes the quote
      while (e - bs > p && t[e - bs - 1] == '\\') ++bs;
      if (bs % 2 == 0) {
        if (const void* nl = std::memchr(t + open, '\n', e - open)) {
          broken = static_cast<size_t>(static_cast<const char*>(nl) - t);
          return npos;
        }
        return e + 1;
      }
      p = e + 1;
    }
  }
  /// After a broken string at `from`: the first line that starts (after blanks) with '{' (the
  /// next event, as profilers write one per line or per block of lines) or ']' (the end of
  /// the array); npos when there is none.
  size_t resync(size_t from) const {
    for (size_t p = from; p < n;) {
      const void* nl = std::memchr(t + p, '\n', n - p);
      if (!nl) return npos;
      p = ws(static_cast<size_t>(static_cast<const char*>(nl) - t) + 1);
      if (p < n && (t[p] == '{' || t[p] == ']')) return p;
    }
    return npos;
  }
  /// The end of the value starting at p, npos when the text ends inside it.
  size_t value_end(size_t p) const {
    if (p >= n) return npos;
    const char c = t[p];
    if (c == '"') return string_end(p);
    if (c == '{' || c == '[') {
      bool handed_over = false;
      const size_t e = kHaveAvx2 ? container_end_avx2(t, n, p, handed_over, broken)
                                 : container_end_sse2(t, n, p, handed_over, broken);
      if (!handed_over) return e;
      broken = npos;
      int depth = 0;
      while (p < n) {
        const char d = t[p];
        if (d == '"') {
          p = string_end(p);
          if (p == npos) return npos;
          continue;
        }
        if (d == '{' || d == '[') ++depth;
        else if (d == '}' || d == ']') {
          if (--depth == 0) return p + 1;
        }
        ++p;
      }
      return npos;
    }
    while (p < n && t[p] != ',' && t[p] != '}' && t[p] != ']' && t[p] != ' ' && t[p] != '\n' && t[p] != '\r' &&
           t[p] != '\t')
      ++p;
    return p;  // a scalar may run to the end of the text
  }
};

// The elements of the array whose '[' is at p; returns the position after ']' or npos.
/// Records an event's span: to the callback when there is one, else into f.events.
void emit(Framing& f, const std::function<void(const Span&)>& on_event, Span sp) {
  ++f.event_count;
  if (on_event) on_event(sp);
  else f.events.push_back(sp);
}

size_t frame_events(const Scanner& s, size_t p, Framing& f, const std::function<void(const Span&)>& on_event) {
  p = s.ws(p + 1);
  if (p < s.n && s.t[p] == ']') return p + 1;
  for (;;) {
    p = s.ws(p);
    if (p >= s.n) {
      f.truncated = true;
      f.truncated_at = p;
      return npos;
    }
    s.broken = npos;
    const size_t e = s.value_end(p);
    if (e == npos && s.t[p] == '{') {
      // A broken string inside this event, or brackets that never close before the end of the
      // text while a later line starts an event (bytes damaged in the middle of the file, e.g.
      // "\0\1garbage{{{": tester37 - not a file cut short): the event (kept, so that parsing it
      // reports it with its line) ends where the next line starts an event or closes the array,
      // and framing goes on from there. A text that really ends inside its last event has no
      // such line: truncated, below.
      const size_t next = s.resync(s.broken != npos ? s.broken : p);
      if (next != npos) {
        size_t end = next;
        while (end > p && (s.t[end - 1] == ' ' || s.t[end - 1] == '\n' || s.t[end - 1] == '\r' ||
                           s.t[end - 1] == '\t' || s.t[end - 1] == ','))
          --end;
        emit(f, on_event, {p, end});
        p = next;
        if (s.t[p] == ']') return p + 1;
        continue;
      }
    }
    if (e == npos || (s.t[p] != '{' && e >= s.n)) {
      f.truncated = true;
      f.truncated_at = p;
      return npos;
    }
    if (s.t[p] == '{') emit(f, on_event, {p, e});
    else ++f.non_object_events;
    p = s.ws(e);
    if (p >= s.n) {
      f.truncated = true;
      f.truncated_at = p;
      return npos;
    }
    if (s.t[p] == ',') {
      ++p;
      continue;
    }
    if (s.t[p] == ']') return p + 1;
    f.structure_error = std::string("expected ',' or ']' after an event, found '") + s.t[p] + "'";
    f.error_offset = p;
    return npos;
  }
}
}  // namespace

Framing frame_document(const char* text, size_t size, const std::function<void(const Span&)>& on_event) {
  Framing f;
  const Scanner s{text, size};
  size_t p = s.ws(0);
  if (p + 3 <= size && static_cast<unsigned char>(text[p]) == 0xEF && static_cast<unsigned char>(text[p + 1]) == 0xBB &&
      static_cast<unsigned char>(text[p + 2]) == 0xBF)
    p = s.ws(p + 3);  // a UTF-8 byte order mark
  if (p >= size) {
    f.truncated = true;
    f.truncated_at = p;
    return f;
  }
  size_t end = npos;
  if (text[p] == '[') {
    f.bare_array = f.found_trace_events = true;
    end = frame_events(s, p, f, on_event);
  } else if (text[p] == '{') {
    p = s.ws(p + 1);
    for (;;) {
      if (p >= size) {
        f.truncated = true;
        f.truncated_at = p;
        break;
      }
      if (text[p] == '}') {
        end = p + 1;
        break;
      }
      if (text[p] != '"') {
        f.structure_error = std::string("expected a key, found '") + text[p] + "'";
        f.error_offset = p;
        break;
      }
      const size_t ke = s.string_end(p);
      if (ke == npos) {
        f.truncated = true;
        f.truncated_at = p;
        break;
      }
      const std::string key(text + p + 1, ke - p - 2);
      size_t v = s.ws(ke);
      if (v >= size || text[v] != ':') {
        if (v >= size) {
          f.truncated = true;
          f.truncated_at = v;
        } else {
          f.structure_error = "expected ':' after key \"" + key + "\"";
          f.error_offset = v;
        }
        break;
      }
      v = s.ws(v + 1);
      size_t ve;
      if (key == "traceEvents" && v < size && text[v] == '[') {
        f.found_trace_events = true;
        ve = frame_events(s, v, f, on_event);
        if (ve == npos) break;
      } else {
        ve = s.value_end(v);
        if (ve == npos || ve >= size) {
          f.truncated = true;
          f.truncated_at = v;
          break;
        }
        f.keys.emplace_back(key, Span{v, ve});
      }
      p = s.ws(ve);
      if (p < size && text[p] == ',') p = s.ws(p + 1);
      else if (p < size && text[p] != '}') {
        f.structure_error = std::string("expected ',' or '}' after the value of \"") + key + "\"";
        f.error_offset = p;
        break;
      }
    }
  } else {
    f.structure_error = std::string("a Chrome trace starts with '{' or '[', found '") + text[p] + "'";
    f.error_offset = p;
  }
  if (end != npos) {
    const size_t rest = s.ws(end);
    if (rest < size) {
      f.trailing_data = true;
      f.trailing_offset = rest;
    }
  }
  return f;
}

}  // namespace embedscope::sessions::importers::kineto
