// The codes and kinds exist in three copies: the public header (manypy_code,
// manypy_value_kind), the core (manypy::Code, manypy::ValueKind) and the
// interpreter side (MPI_ERR_*, MPI_VALUE_*), which is C in another link-map
// namespace and cannot share the core's enums. Values cross between them by
// number, so the build fails here if any two copies disagree.
#include "code_names.h"
#include "error.h"
#include "interp_api.h"
#include "manypy.h"
#include "value.h"

namespace {

template <typename Core>
constexpr bool same(manypy_code c, Core core, int interp) {
  return static_cast<int>(c) == static_cast<int>(core) && static_cast<int>(c) == interp;
}

using manypy::Code;
using manypy::ValueKind;

static_assert(MANYPY_OK == 0 && MPI_OK == 0);
static_assert(same(MANYPY_ERR_INVALID_ARGUMENT, Code::kInvalidArgument, MPI_ERR_INVALID_ARGUMENT));
static_assert(same(MANYPY_ERR_OUT_OF_RANGE, Code::kOutOfRange, MPI_ERR_OUT_OF_RANGE));
static_assert(same(MANYPY_ERR_PYTHON, Code::kPython, MPI_ERR_PYTHON));
static_assert(same(MANYPY_ERR_SYNTAX, Code::kSyntax, MPI_ERR_SYNTAX));
static_assert(same(MANYPY_ERR_UNSUPPORTED_TYPE, Code::kUnsupportedType, MPI_ERR_UNSUPPORTED_TYPE));
static_assert(MANYPY_ERR_WRONG_KIND == static_cast<int>(Code::kWrongKind));
static_assert(same(MANYPY_ERR_STATIC_TLS, Code::kStaticTls, MPI_ERR_STATIC_TLS));
static_assert(same(MANYPY_ERR_RESOURCE_EXHAUSTED, Code::kResourceExhausted,
                   MPI_ERR_RESOURCE_EXHAUSTED));
static_assert(same(MANYPY_ERR_LOADER, Code::kLoader, MPI_ERR_LOADER));
static_assert(MANYPY_ERR_INTERPRETER_BROKEN == static_cast<int>(Code::kInterpreterBroken));
static_assert(same(MANYPY_ERR_INTERNAL, Code::kInternal, MPI_ERR_INTERNAL));
static_assert(MANYPY_ERR_NOT_FOUND == static_cast<int>(Code::kNotFound));
static_assert(same(MANYPY_ERR_BAD_ARCHIVE, Code::kBadArchive, MPI_ERR_BAD_ARCHIVE));
static_assert(MANYPY_ERR_NOT_A_PACKAGE == static_cast<int>(Code::kNotAPackage));
static_assert(MANYPY_ERR_UNSUPPORTED_VERSION == static_cast<int>(Code::kUnsupportedVersion));
static_assert(same(MANYPY_ERR_MODULE_NOT_FOUND, Code::kModuleNotFound, MPI_ERR_MODULE_NOT_FOUND));
static_assert(same(MANYPY_ERR_BAD_TENSOR, Code::kBadTensor, MPI_ERR_BAD_TENSOR));
static_assert(same(MANYPY_ERR_NO_SUCH_NAME, Code::kNoSuchName, MPI_ERR_NO_SUCH_NAME));
static_assert(same(MANYPY_ERR_DEADLINE_EXCEEDED, Code::kDeadlineExceeded,
                   MPI_ERR_DEADLINE_EXCEEDED));
static_assert(same(MANYPY_ERR_CANCELLED, Code::kCancelled, MPI_ERR_CANCELLED));
static_assert(same(MANYPY_ERR_UNTRUSTED_ARCHIVE, Code::kUntrustedArchive,
                   MPI_ERR_UNTRUSTED_ARCHIVE));
// Only the host refuses calls for overload: the interpreter side has no such code.
static_assert(MANYPY_ERR_OVERLOADED == static_cast<int>(Code::kOverloaded));
static_assert(MANYPY_ERR_DRAINING == static_cast<int>(Code::kDraining));
static_assert(MANYPY_CODE_SLOTS == manypy::kCodeSlots);

constexpr bool same_kind(manypy_value_kind k, ValueKind core, int interp) {
  return static_cast<int>(k) == static_cast<int>(core) && static_cast<int>(k) == interp;
}

static_assert(same_kind(MANYPY_VALUE_NONE, ValueKind::kNone, MPI_VALUE_NONE));
static_assert(same_kind(MANYPY_VALUE_BOOL, ValueKind::kBool, MPI_VALUE_BOOL));
static_assert(same_kind(MANYPY_VALUE_INT64, ValueKind::kInt64, MPI_VALUE_INT64));
static_assert(same_kind(MANYPY_VALUE_DOUBLE, ValueKind::kDouble, MPI_VALUE_DOUBLE));
static_assert(same_kind(MANYPY_VALUE_STRING, ValueKind::kString, MPI_VALUE_STRING));
static_assert(same_kind(MANYPY_VALUE_TENSOR, ValueKind::kTensor, MPI_VALUE_TENSOR));
static_assert(same_kind(MANYPY_VALUE_BYTES, ValueKind::kBytes, MPI_VALUE_BYTES));
static_assert(same_kind(MANYPY_VALUE_LIST, ValueKind::kList, MPI_VALUE_LIST));
static_assert(same_kind(MANYPY_VALUE_TUPLE, ValueKind::kTuple, MPI_VALUE_TUPLE));
static_assert(same_kind(MANYPY_VALUE_DICT, ValueKind::kDict, MPI_VALUE_DICT));

static_assert(MPI_MAX_DEPTH == manypy::Value::kMaxDepth &&
              MANYPY_VALUE_MAX_DEPTH == manypy::Value::kMaxDepth);
static_assert(MANYPY_DL_BOOL == MPI_DL_BOOL && MANYPY_DL_BOOL == manypy::kDLBoolCode);

}  // namespace
