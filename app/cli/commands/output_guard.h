#pragma once
// One rule for every command that writes a file (tester45 F6/F7): an existing output is replaced
// only with --force-overwrite, and an output that is one of the command's inputs is refused with
// or without it (writing there would destroy the input). `import` and `merge` keep their own
// checks (staged_output.h); these are for the commands that write one plain file. A session that
// a live run writes is never replaced, with --force-overwrite either (tester54 F1).

#include <string>
#include <string_view>
#include <vector>

#include "embedscope/engine/workload/output_folder.h"

namespace embedscope::cli {

/// The check of an output name every command that writes a file makes (CLI11 Validator body):
/// "" for a name, and for an empty one (`-o ''`, an unset $OUT in CI) "an empty name; " +
/// `remedy`, which CLI11 prints as "--output: an empty name; REMEDY" with exit 2. Before, export
/// wrote into the current folder, import took its default name, and rebalance and calibrate
/// wrote nothing and exited 0.
std::string empty_output_name_refusal(const std::string& value, std::string_view remedy);

/// The first of `inputs` that is the same file as `out` (compared by identity: same device and
/// inode; inputs that do not exist or are directories are skipped), or "" when none is, or when
/// `out` does not exist yet.
std::string input_that_is(const std::string& out, const std::vector<std::string>& inputs);

/// Throws engine::SpecError naming `flag` and `out` when `out` is the same file as one of `inputs`
/// (compared by identity: same device and inode, so "./t.db" and "t.db" or a hard link are
/// caught; inputs that do not exist or are directories are skipped). Nothing when `out` does not
/// exist yet. `command` is the subcommand's name ("rebalance"), for the message.
void refuse_output_that_is_an_input(const std::string& out, std::string_view flag,
                                    const std::vector<std::string>& inputs, std::string_view command);

/// Throws engine::SpecError naming `flag` and `out` when `out` exists and `overwrite` is false
/// (the message says how to allow it: `embedscope COMMAND ... --force-overwrite`). With
/// `overwrite`, throws sessions::SessionError when `out` is the session file of a run still
/// writing it (sessions::refuse_replacing_live_session, as run, import and merge refuse it).
void refuse_existing_output(const std::string& out, std::string_view flag, bool overwrite, std::string_view command);

/// The missing folder of an output file: engine::make_output_folder (output_folder.h), the one
/// helper the UI's --screenshot shares.
using engine::make_output_folder;

}  // namespace embedscope::cli
