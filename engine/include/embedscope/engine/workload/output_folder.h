#pragma once
// make_output_folder: the one way every command of `embedscope` and `embedscope-ui` makes the
// missing folder of a file it is told to write (run / import / export / calibrate / tokenize -o,
// rebalance --plan-out, embedscope-ui --screenshot).

#include <string>
#include <string_view>

namespace embedscope::engine {

/// Makes the folder `out` is to be written in when it is missing (its parent path with every
/// missing folder above it, as `mkdir -p`; `scenario -o DIR` makes DIR the same way), so that
/// `run -o runs/a.db` in an empty folder writes runs/a.db. Nothing for a name without a folder or
/// a folder that exists. Throws SpecError naming `flag`, `out` and the folder when it cannot be
/// made (a file of that name is in the way, no permission): "-o x/a.db: cannot make the folder x:
/// Not a directory".
void make_output_folder(const std::string& out, std::string_view flag);

}  // namespace embedscope::engine
