#pragma once
// The unit ladder behind format_duration (units.h), for a chart axis that must pick one unit for
// all of its values, and throughputs that may be below one a second. A header of its own: units.h
// is included by the sharding header (about 250 objects rebuild when it changes).

#include <cstdint>
#include <string>

namespace embedscope::sessions {

/// One rung of the duration ladder: its name ("ns", "us", "ms", "s", "min", "h", "d"), its length
/// in ns (1, 1e3, 1e6, 1e9, 60e9, 3600e9, 86400e9) and the decimals format_duration gives it.
struct DurationUnit {
  const char* name = "ns";
  double ns = 1;
  int decimals = 0;
};

/// The unit format_duration writes |ns| in: ns below 1 us, us below 1 ms, ms below 1 s, s below
/// 10 min, min below 100 min, h below 48 h, d from 48 h on. A chart passes its largest value
/// (0.5e6 -> us, 47e12 (13 h) -> h, 4.46e15 (51.6 d) -> d), then divides every value by .ns and
/// labels the axis "(name)". Never throws; NaN reads as ns.
DurationUnit duration_unit(double ns);

/// A rate per second for text ("samples/s" follows): whole numbers from 1 on ("15378", "3"), three
/// significant digits below 1 ("0.250", "0.000340": a 13-hour step's throughput is not "0"), "0"
/// for 0 and "< 0.000000001" for positive rates below that. Negative rates keep their sign
/// (a difference). NaN and infinities: "-". Never throws except std::bad_alloc.
std::string format_rate(double per_s);

/// A duration in ns as `embedscope stats` writes its columns: "12.34 ms" (two decimals) below 10
/// minutes, so that a table's column reads in one unit; from 10 minutes on format_duration's
/// ladder ("12.5 min", "13.05 h", "51.61 d"). NaN and infinities read "nan ms" / "inf ms" as fmt
/// writes them. Never throws except std::bad_alloc.
std::string format_ms(double ns);

}  // namespace embedscope::sessions
