// A check of TorchScript's debug records (code/**.py.debug_pkl): the source
// ranges libtorch reads lazily, when an error message highlights code.
// libtorch 1.13 indexes into what it unpickles from them without bounds
// checks (ConcreteSourceRangeUnpickler, SourceRangeDeserializer), so a
// well-formed pickle of the wrong shape (an empty tuple, a text index past
// the text table) crashed the process while a parse error was being
// reported (found by fuzz_script_load). This walks the same structure with
// checks first.
#pragma once

#include <string>

namespace manypy {

// Throws Error(BAD_ARCHIVE) naming `where` unless `bytes` (a pickle that
// check_pickle accepted) holds source ranges as libtorch reads them.
void check_torchscript_debug_record(const std::string& bytes, const std::string& where);

}  // namespace manypy
