#pragma once
// Every input file (token files, checkpoints, records being continued) is read only when it is a
// regular file: opening a FIFO blocks until a writer comes (forever, for a run started by
// mistake on one), a device may never end and a directory or socket holds no file to read.
#include <string>

namespace pt::io {

// Fails with one line, "<what>: is a FIFO (named pipe); <noun> must be a regular file" (or
// "<what>: cannot open: <cause>" when the path cannot be looked up), unless `path` names a
// regular file (a symbolic link counts as what it points to). Opens nothing, so it never blocks.
// what: "checkpoint 'ck.h5'"; noun: "a checkpoint" (or "it").
void require_regular_file(const std::string& path, const std::string& what, const std::string& noun);

// The whole of the regular file `path` as text, or one error starting with `what`.
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace pt::io
