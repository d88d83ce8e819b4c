/*
 * manypy_deploy_example: the C++ program of PyTorch's torch::deploy tutorial
 * ("Loading and running the model in C++"), rewritten against manypy's C API.
 *
 *   torch::deploy                           manypy
 *   PathEnvironment(getenv(...))            manypy_pool_options_add_sys_path
 *   InterpreterManager manager(4, env)      manypy_pool_create (4 interpreters)
 *   manager.loadPackage(path)               manypy_package_load_file
 *   package.loadPickle("model", ...)        manypy_package_load_pickle
 *   torch::ones({1, 1, 10, 10})             manypy_value_new_tensor_from_buffer
 *   model(inputs).toTensor()                manypy_object_call + _get_tensor
 *   catch (const c10::Error& e)             a manypy_status* from every call
 *
 * The package is the tutorial's model (samples/models builds it, seeded, as
 * seed_example.pt):
 *
 *   model = nn.Sequential(nn.Conv2d(1,20,5), nn.ReLU(),
 *                         nn.Conv2d(20,64,5), nn.ReLU())
 *   with PackageExporter("my_package.pt") as e:
 *       e.extern("numpy.**")
 *       e.save_pickle("model", "model.pkl", model)
 *
 * Usage: PATH_TO_EXTERN_PYTHON_PACKAGES=DIR manypy_deploy_example PACKAGE.pt
 */
#include <stdio.h>
#include <stdlib.h>

#include "manypy.h"

/* What the tutorial's catch block prints, plus what a status carries: the
 * stable code, the message and, when Python raised, its traceback. */
static int report(const char* what, manypy_status* st) {
  manypy_code code = manypy_status_code(st);
  fprintf(stderr, "error %s\n%s (%d): %s\n%s", what, manypy_code_name(code), (int)code,
          manypy_status_message(st), manypy_status_traceback(st));
  manypy_status_free(st);
  return 1;
}

/* Prints a tensor the way libtorch's operator<< does for 3 and more
 * dimensions: one "(i,j,.,.) =" block per matrix of the last two dimensions
 * (1-based indices), then the type and shape. Only dimension 1 is cut, to
 * [0, end): the tutorial's output.slice(1, 0, 5). */
static void print_slice_dim1(const DLTensor* t, int64_t end) {
  const int nd = t->ndim;
  int64_t shape[8], strides[8], index[8] = {0};
  for (int d = nd - 1; d >= 0; --d) {
    shape[d] = t->shape[d];
    /* strides NULL means C-contiguous */
    strides[d] = t->strides ? t->strides[d] : (d == nd - 1 ? 1 : strides[d + 1] * shape[d + 1]);
  }
  if (shape[1] > end) shape[1] = end;
  const float* base = (const float*)((const char*)t->data + t->byte_offset);
  for (;;) {
    /* index[0 .. nd-3] picks one matrix. */
    putchar('(');
    for (int d = 0; d < nd - 2; ++d) printf("%lld,", (long long)index[d] + 1);
    printf(".,.) = \n");
    for (int64_t r = 0; r < shape[nd - 2]; ++r) {
      for (int64_t c = 0; c < shape[nd - 1]; ++c) {
        int64_t offset = r * strides[nd - 2] + c * strides[nd - 1];
        for (int d = 0; d < nd - 2; ++d) offset += index[d] * strides[d];
        printf(" %8.4f", base[offset]);
      }
      putchar('\n');
    }
    int d = nd - 3; /* next matrix: count up like an odometer */
    while (d >= 0 && ++index[d] == shape[d]) index[d--] = 0;
    if (d < 0) break;
    putchar('\n');
  }
  printf("[ CPUFloatType{");
  for (int d = 0; d < nd; ++d) printf("%s%lld", d ? "," : "", (long long)shape[d]);
  printf("} ]\n");
}

int main(int argc, const char* argv[]) {
  if (argc != 2) {
    fprintf(stderr, "usage: manypy_deploy_example <path-to-torch-package>\n");
    return 2;
  }

  /* A pool of 4 interpreters; where the package's extern modules (numpy)
   * live goes on every interpreter's sys.path, as PathEnvironment does.
   * Debian's own dist-packages are on sys.path already, so it is optional. */
  manypy_pool_options* options = manypy_pool_options_new();
  if (!options) {
    fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  manypy_status* st = manypy_pool_options_set_interpreters(options, 4);
  const char* extern_path = getenv("PATH_TO_EXTERN_PYTHON_PACKAGES");
  if (!st && extern_path && *extern_path) {
    st = manypy_pool_options_add_sys_path(options, extern_path);
  }
  manypy_pool* pool = NULL;
  if (!st) st = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  if (st) return report("starting the interpreters", st);

  /* Load the model from the torch.package. */
  manypy_package* package = NULL;
  manypy_object* model = NULL;
  st = manypy_package_load_file(pool, argv[1], &package);
  if (!st) st = manypy_package_load_pickle(package, "model", "model.pkl", &model);
  manypy_package_free(package); /* the model keeps what it needs */
  if (st) {
    manypy_pool_destroy(pool);
    return report("loading the model", st);
  }
  printf("Loaded model\n");

  /* The inputs: a tuple holding torch.ones(1, 1, 10, 10). Copied (copy = 1)
   * because `ones` lives on this stack frame; a borrowed buffer must outlive
   * every use manypy makes of it. */
  float ones[1 * 1 * 10 * 10];
  for (size_t i = 0; i < sizeof ones / sizeof ones[0]; ++i) ones[i] = 1.0f;
  const int64_t shape[4] = {1, 1, 10, 10};
  const DLDataType float32 = {kDLFloat, 32, 1};
  manypy_value* input = NULL;
  manypy_value* inputs = manypy_value_new_tuple();
  st = manypy_value_new_tensor_from_buffer(ones, sizeof ones, float32, 4, shape, NULL, 1, NULL,
                                           NULL, &input);
  if (!st) st = manypy_value_append(inputs, input); /* takes ownership of input */

  /* Execute the model on any free interpreter and take its output tensor
   * (a DLPack view, no copy). */
  manypy_value* output = NULL;
  DLManagedTensor* tensor = NULL;
  int printed = 0;
  if (!st) st = manypy_object_call(model, NULL, inputs, NULL, NULL, &output);
  if (!st) st = manypy_value_get_tensor(output, &tensor);
  if (!st) {
    const DLTensor* t = &tensor->dl_tensor;
    if (t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1 && t->ndim >= 3 &&
        t->ndim <= 8) {
      print_slice_dim1(t, 5);
      printed = 1;
    } else {
      fprintf(stderr,
              "error: the model returned a tensor this example does not print "
              "(it expects float32 with 3 to 8 dimensions)\n");
    }
    tensor->deleter(tensor);
  }

  manypy_value_free(output);
  manypy_value_free(inputs);
  manypy_object_free(model);
  manypy_pool_destroy(pool);
  if (st) return report("running the model", st);
  return printed ? 0 : 1;
}
