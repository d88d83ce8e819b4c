package org.manypy;

/** A tensor with a dtype, device, shape or strides manypy cannot accept. (MANYPY_ERR_BAD_TENSOR) */
public class BadTensorException extends ManypyException {
  private static final long serialVersionUID = 1L;

  BadTensorException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
