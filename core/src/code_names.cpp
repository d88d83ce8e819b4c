#include "code_names.h"

#include <cctype>
#include <cstring>

namespace manypy {

const char* code_name(int code) noexcept {
  switch (code) {
    case 0:
      return "MANYPY_OK";
    case 1:
      return "MANYPY_ERR_INVALID_ARGUMENT";
    case 2:
      return "MANYPY_ERR_OUT_OF_RANGE";
    case 3:
      return "MANYPY_ERR_PYTHON";
    case 4:
      return "MANYPY_ERR_SYNTAX";
    case 5:
      return "MANYPY_ERR_UNSUPPORTED_TYPE";
    case 6:
      return "MANYPY_ERR_WRONG_KIND";
    case 7:
      return "MANYPY_ERR_STATIC_TLS";
    case 8:
      return "MANYPY_ERR_RESOURCE_EXHAUSTED";
    case 9:
      return "MANYPY_ERR_LOADER";
    case 10:
      return "MANYPY_ERR_INTERPRETER_BROKEN";
    case 11:
      return "MANYPY_ERR_INTERNAL";
    case 12:
      return "MANYPY_ERR_NOT_FOUND";
    case 13:
      return "MANYPY_ERR_BAD_ARCHIVE";
    case 14:
      return "MANYPY_ERR_NOT_A_PACKAGE";
    case 15:
      return "MANYPY_ERR_UNSUPPORTED_VERSION";
    case 16:
      return "MANYPY_ERR_MODULE_NOT_FOUND";
    case 17:
      return "MANYPY_ERR_BAD_TENSOR";
    case 18:
      return "MANYPY_ERR_NO_SUCH_NAME";
    case 19:
      return "MANYPY_ERR_DEADLINE_EXCEEDED";
    case 20:
      return "MANYPY_ERR_CANCELLED";
    case 21:
      return "MANYPY_ERR_UNTRUSTED_ARCHIVE";
    case 22:
      return "MANYPY_ERR_OVERLOADED";
    case 23:
      return "MANYPY_ERR_DRAINING";
  }
  return "MANYPY_UNKNOWN";
}

std::string code_label(int code) {
  std::string name = code_name(code);
  for (const char* prefix : {"MANYPY_ERR_", "MANYPY_"}) {
    if (name.rfind(prefix, 0) == 0) {
      name.erase(0, std::strlen(prefix));
      break;
    }
  }
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace manypy
