// The names of status codes (error.h's Code, manypy_code's numbers): the
// C API's manypy_code_name and the `code` label of request metrics.
#pragma once

#include <string>

namespace manypy {

// The number of code slots in per-code counters (manypy.h's
// MANYPY_CODE_SLOTS): room for codes later versions append.
constexpr int kCodeSlots = 32;

// "MANYPY_OK", "MANYPY_ERR_PYTHON", ...; "MANYPY_UNKNOWN" for a number no
// code has. Static storage.
const char* code_name(int code) noexcept;

// The name as a metrics label: lower case, without the prefix ("ok",
// "python", "deadline_exceeded"); "unknown" for a number no code has.
std::string code_label(int code);

}  // namespace manypy
