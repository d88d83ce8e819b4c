#include "interp_values.h"

namespace manypy {

namespace {

// A tensor made by an interpreter, as the host holds it. Its deleter is the
// namespace's torch, and can enter the interpreter: torch keeps the Python
// object of a tensor that C++ still references, and when the last reference
// goes (the host freeing a result) it drops that object under the GIL,
// creating a Python thread state for the calling thread. That thread may
// never have entered the namespace (a HANDOFF caller, a thread that only
// frees values), so it is prepared first, as for any entry (key blocks and
// ctype tables, docs/isolation.md hazards 1 and 9). Unprepared, the
// namespace libc allocated the thread's key block, and the host libc freed
// it when the thread exited: "double free or corruption", found by
// tests/soak (HANDOFF, threads that call once and exit).
struct NamespaceTensor {
  DLManagedTensor managed{};
  DLManagedTensor* inner = nullptr;
  isolation::Namespace* ns = nullptr;
};

void delete_namespace_tensor(DLManagedTensor* managed) {
  auto* t = static_cast<NamespaceTensor*>(managed->manager_ctx);
  t->ns->prepare_thread();
  t->inner->deleter(t->inner);
  delete t;
}

// `inner`, with a deleter that prepares the thread. Throws std::bad_alloc,
// leaving `inner` to the caller.
DLManagedTensor* prepared_deleter(DLManagedTensor* inner, isolation::Namespace* ns) {
  if (ns == nullptr || inner->deleter == nullptr) return inner;
  auto* t = new NamespaceTensor();
  t->managed.dl_tensor = inner->dl_tensor;  // shape and strides stay inner's
  t->managed.manager_ctx = t;
  t->managed.deleter = delete_namespace_tensor;
  t->inner = inner;
  t->ns = ns;
  return &t->managed;
}

}  // namespace

ArgTree::ArgTree(const Value& value) { build(value, root_); }

ArgTree::~ArgTree() {
  if (handed_over_) return;
  std::vector<const mpi_value*> pending{&root_};
  while (!pending.empty()) {
    const mpi_value* v = pending.back();
    pending.pop_back();
    if (v->kind == MPI_VALUE_TENSOR && v->tensor) v->tensor->deleter(v->tensor);
    for (size_t k = 0; k < v->count; ++k) pending.push_back(&v->items[k]);
  }
}

void ArgTree::build(const Value& value, mpi_value& out) {
  out = mpi_value{};
  out.kind = static_cast<int>(value.kind);
  switch (value.kind) {
    case ValueKind::kNone:
      break;
    case ValueKind::kBool:
      out.i = value.b;
      break;
    case ValueKind::kInt64:
      out.i = value.i;
      break;
    case ValueKind::kDouble:
      out.d = value.d;
      break;
    case ValueKind::kString:
    case ValueKind::kBytes:
      out.s = value.s.data();
      out.len = value.s.size();
      break;
    case ValueKind::kTensor:
      out.tensor = Tensor::share(value.tensor);
      break;
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kDict: {
      // The arrays' buffers never move, even when the vectors holding them
      // grow during the recursion below: keep their data(), not references.
      const size_t n = value.items.size();
      mpi_value* items = item_arrays_.emplace_back(n).data();
      out.items = items;
      out.count = n;
      if (value.kind == ValueKind::kDict) {
        const char** keys = key_arrays_.emplace_back(n).data();
        size_t* lengths = key_length_arrays_.emplace_back(n).data();
        for (size_t k = 0; k < n; ++k) {
          keys[k] = value.keys[k].c_str();
          lengths[k] = value.keys[k].size();
        }
        out.keys = keys;
        out.key_lengths = lengths;
      }
      for (size_t k = 0; k < n; ++k) build(value.items[k], items[k]);
      break;
    }
  }
}

Value& Outcome::slot() {
  if (open_.empty()) return root_;
  Value& container = *open_.back();
  if (container.kind == ValueKind::kDict) return container.put(std::move(pending_key_), Value());
  return container.append(Value());
}

void Outcome::on_error(void* ctx, int code, const char* py_type, const char* message,
                       const char* traceback) {
  auto* self = static_cast<Outcome*>(ctx);
  if (self->error) return;  // keep the first, most specific error
  std::string text = message ? message : "";
  if (code == static_cast<int>(Code::kStaticTls)) {
    text = std::string(kStaticTlsHint) + " (" + text + ")";
  }
  self->error.emplace(static_cast<Code>(code), std::move(text), py_type ? py_type : "",
                      traceback ? traceback : "");
}

// The callbacks below are called from C in an interpreter's namespace: no
// exception may leave them.
void Outcome::on_value(void* ctx, const mpi_value* v) {
  auto* self = static_cast<Outcome*>(ctx);
  try {
    self->store(v);
  } catch (const Error& e) {
    if (!self->error) self->error = e;
  } catch (const std::exception& e) {
    if (v->kind == MPI_VALUE_TENSOR) v->tensor->deleter(v->tensor);
    if (!self->error) self->error.emplace(Code::kResourceExhausted, e.what());
  }
}

void Outcome::store(const mpi_value* v) {
  if (error) {  // a result that will be thrown away; still release its tensor
    if (v->kind == MPI_VALUE_TENSOR) v->tensor->deleter(v->tensor);
    return;
  }
  Value& out = slot();
  out.kind = static_cast<ValueKind>(v->kind);
  switch (out.kind) {
    case ValueKind::kBool:
      out.b = v->i != 0;
      break;
    case ValueKind::kInt64:
      out.i = v->i;
      break;
    case ValueKind::kDouble:
      out.d = v->d;
      break;
    case ValueKind::kString:
    case ValueKind::kBytes:
      out.s.assign(v->s, v->len);
      break;
    case ValueKind::kTensor:
      // Adopt even if something fails later, so the deleter always runs.
      out.tensor = Tensor::adopt(prepared_deleter(v->tensor, ns_));
      break;
    default:
      break;
  }
}

void Outcome::on_begin(void* ctx, int kind, size_t count) {
  auto* self = static_cast<Outcome*>(ctx);
  try {
    Value& out = self->slot();
    out = Value::container(static_cast<ValueKind>(kind));
    (void)count;  // items never move: pointers to nested containers stay valid
    self->open_.push_back(&out);
  } catch (const std::exception& e) {
    if (!self->error) self->error.emplace(Code::kResourceExhausted, e.what());
  }
}

void Outcome::on_key(void* ctx, const char* key, size_t length) {
  auto* self = static_cast<Outcome*>(ctx);
  try {
    self->pending_key_.assign(key, length);
  } catch (const std::exception& e) {
    if (!self->error) self->error.emplace(Code::kResourceExhausted, e.what());
  }
}

void Outcome::on_end(void* ctx) {
  auto* self = static_cast<Outcome*>(ctx);
  if (self->open_.empty()) return;
  Value* done = self->open_.back();
  self->open_.pop_back();
  // Its items were filled in place, after it joined its parent: the parent's
  // depth learns of them now. (The interpreter side limits results to
  // Value::kMaxDepth.)
  if (!self->open_.empty()) {
    Value* parent = self->open_.back();
    parent->depth = parent->depth_with(*done);
  }
}

}  // namespace manypy
