// A structural check of pickle streams, for the pickles that libtorch's own
// unpickler reads (a TorchScript archive's data.pkl, constants.pkl and
// *.debug_pkl; the same records of TorchScript modules inside a
// torch.package). That unpickler trusts its input: an opcode that pops more
// than the stack holds, or a pop-to-mark without a mark, reads outside its
// vectors and crashes the process. Python's unpickler, which reads a
// package's own pickles, checks these itself.
//
// The check walks the opcodes once, as pickletools documents them, tracking
// only the stack's depth, the marks and which memo slots were set. It does
// not decide what a valid pickle means (types, globals): libtorch does that,
// and reports it as a c10::Error.
#pragma once

#include <string>
#include <string_view>

namespace manypy {

// Throws Error(BAD_ARCHIVE) naming `where`, the opcode and its offset if
// `bytes` is not one well-formed pickle: unknown opcode, an argument cut
// short, a pop below the stack's bottom or below the innermost mark, a
// pop-to-mark with no mark, a memo slot read before it was set or set out of
// order, or no STOP.
void check_pickle(std::string_view bytes, const std::string& where);

// True for the records libtorch unpickles itself when it loads TorchScript.
bool is_torch_pickle_record(std::string_view name);

// True for TorchScript's source-range records among them (*.debug_pkl).
bool is_torch_debug_record(std::string_view name);

}  // namespace manypy
