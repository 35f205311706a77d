#pragma once
// The first pass over a Chrome-trace text: where each event object of `traceEvents` lies, and
// the other top-level keys, without parsing the events. It only tracks strings and bracket
// depth (64 bytes at a time with SSE2 or AVX2 bit masks, 4-5 GB/s on the 2-core machine; a value
// holding a backslash goes through a byte loop), so a damaged event costs that event only (it
// is parsed on its own), and a text cut anywhere keeps every complete event before the cut.

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace embedscope::sessions::importers::kineto {

/// [begin, end) byte range in the text.
struct Span {
  size_t begin = 0, end = 0;
};

struct Framing {
  std::vector<Span> events;                           ///< each a complete `{...}` element of traceEvents
                                                      ///< (empty when they went to an on_event callback)
  size_t event_count = 0;                             ///< events framed (stored or passed on)
  std::vector<std::pair<std::string, Span>> keys;     ///< other top-level keys (raw key text) and their values
  bool bare_array = false;                            ///< the document is a bare array of events
  bool found_trace_events = false;
  bool truncated = false;                             ///< the text ended inside traceEvents or the document
  size_t truncated_at = 0;                            ///< where the incomplete part began
  size_t non_object_events = 0;                       ///< elements of traceEvents that are not objects
  std::string structure_error;                        ///< a character that breaks the structure; "" none
  size_t error_offset = 0;
  bool trailing_data = false;                         ///< text after the closing bracket of the document
  size_t trailing_offset = 0;
};

/// Frames `text` (size bytes). Never throws itself; problems are described in the result. Each
/// event's span goes, in text order, to `on_event` when one is given (while its bytes are still
/// in cache from the framing: the text is read from memory once), else into Framing::events.
Framing frame_document(const char* text, size_t size, const std::function<void(const Span&)>& on_event = nullptr);

}  // namespace embedscope::sessions::importers::kineto
