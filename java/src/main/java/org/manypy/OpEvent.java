package org.manypy;

import java.util.List;

/**
 * One sampled operator (manypy_op_event).
 *
 * @param name the operator, e.g. "aten::add"
 * @param sequenceNumber torch's sequence number of the operator
 * @param threadId the OS thread id (gettid) running it
 * @param interpreter the interpreter's index in the process; -1 for TorchScript on the host
 * @param startNanos CLOCK_MONOTONIC at entry
 * @param endNanos CLOCK_MONOTONIC at exit; 0 in an enter callback
 * @param modelId the caller's context ({@link CallOptions#context}); "" if none
 * @param requestId likewise
 * @param inputs the inputs' kinds, dtypes and shapes when asked for; else empty
 */
public record OpEvent(
    String name,
    long sequenceNumber,
    long threadId,
    int interpreter,
    long startNanos,
    long endNanos,
    String modelId,
    String requestId,
    List<OpInput> inputs) {}
