# Sourced by the scripts of tests/fuzz, which set fuzz_dir to tests/fuzz:
# the sanitizers' settings for the fuzz targets (docs/hardening.md,
# "Sanitizer options"). A caller's own ASAN_OPTIONS / UBSAN_OPTIONS /
# LSAN_OPTIONS win.
#  - allocator_may_return_null: a malloc that cannot be served returns NULL
#    (std::bad_alloc, MANYPY_ERR_RESOURCE_EXHAUSTED), as glibc's would,
#    instead of ending the process;
#  - replaying (MANYPY_FUZZ_REPLAY=1): fast_unwind_on_malloc=0, full
#    allocation stacks through libtorch, which has no frame pointers, so
#    lsan.supp can name the frames of the known libtorch leak; fuzzing:
#    fast stacks and lsan_fuzzing.supp (see there why);
#  - detect_container_overflow is left on: libstdc++ annotates no container
#    unless built with _GLIBCXX_SANITIZE_VECTOR, so uninstrumented libtorch
#    cannot trip it.
if [ "${MANYPY_FUZZ_REPLAY:-0}" = 1 ]; then
  unwind=fast_unwind_on_malloc=0 supp=lsan.supp
else
  unwind=fast_unwind_on_malloc=1 supp=lsan_fuzzing.supp
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1:$unwind}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$fuzz_dir/$supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && command -v llvm-symbolizer >/dev/null; then
  ASAN_SYMBOLIZER_PATH="$(command -v llvm-symbolizer)"
  export ASAN_SYMBOLIZER_PATH
fi
