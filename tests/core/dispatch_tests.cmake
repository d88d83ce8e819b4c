# Unit tests of the dispatch layer and what it records, which start no
# interpreter and run in seconds: the chooser, jobs, the work queue, the
# request metrics, and batch splitting. Included from CMakeLists.txt here,
# whose manypy_core_test they use.
manypy_core_test(dispatch_chooser_test)
# Jobs carry values, and their completions cross threads (the completion
# thread, the watchdog's): worth the sanitizers.
manypy_core_test(dispatch_job_test memory)
manypy_core_test(dispatch_work_queue_test)
# Calls moving off a retired interpreter race stops across the watchdogs'
# and the completion thread: worth the sanitizers.
manypy_core_test(dispatch_move_test memory)
manypy_core_test(request_metrics_test)
# Batches are tensors, made and split with libtorch on the host.
manypy_core_test(batch_values_test memory)
