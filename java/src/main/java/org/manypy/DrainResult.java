package org.manypy;

/**
 * What a {@link Pool#drain} did with the calls in flight when it began.
 *
 * @param finished how many finished by themselves
 * @param cancelled how many the drain cancelled at its deadline (they ended with {@link
 *     CancelledException})
 */
public record DrainResult(long finished, long cancelled) {}
