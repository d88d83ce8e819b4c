//! Conversions between [`Tensor`] and `ndarray` arrays (cargo feature
//! `ndarray`): views borrow the tensor's memory, and arrays in standard
//! layout move into tensors without copying.
use ndarray::{ArrayD, ArrayViewD, IxDyn, ShapeBuilder};

use crate::error::{Code, Error, Result};
use crate::tensor::{Element, Tensor};

impl Tensor {
    /// A read-only view of the elements with the tensor's shape and strides,
    /// without copying; borrowed from this handle. Freezes the tensor, and is
    /// `Err` (`TensorLent`) while Python may write it (see [`Tensor`]).
    pub fn as_array<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        let shape: Vec<usize> = self.shape().iter().map(|&d| d as usize).collect();
        if self.is_contiguous() {
            let data = self.as_slice::<T>()?;
            return ArrayViewD::from_shape(IxDyn(&shape), data)
                .map_err(|e| Error::new(Code::BadTensor, e.to_string()));
        }
        // Strided (non-negative strides, checked when the tensor was made):
        // validate the elements once, then view them in place.
        let copy = self.to_vec::<T>()?; // checks dtype and bool bytes, and freezes
        drop(copy);
        let strides: Vec<usize> = self
            .strides()
            .unwrap_or(&[])
            .iter()
            .map(|&s| s as usize)
            .collect();
        let ptr = self.data_ptr() as *const T;
        if (ptr as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::new(
                Code::BadTensor,
                "the tensor's data is not aligned for its dtype",
            ));
        }
        // Safety: every element the shape and strides reach lies within the
        // tensor's memory, which lives as long as `self`, and which nothing
        // writes once frozen (to_vec froze it).
        Ok(unsafe { ArrayViewD::from_shape_ptr(IxDyn(&shape).strides(IxDyn(&strides)), ptr) })
    }

    /// A tensor from an array: moved without copying when the array is in
    /// standard (C) layout, copied into one otherwise.
    pub fn from_array<T: Element>(array: ArrayD<T>) -> Result<Tensor> {
        let shape: Vec<i64> = array.shape().iter().map(|&d| d as i64).collect();
        if array.is_standard_layout() {
            let (data, offset) = array.into_raw_vec_and_offset();
            match offset {
                Some(0) | None => return Tensor::from_vec(data, &shape),
                Some(start) => {
                    return Tensor::from_slice(
                        &data[start..start + shape.iter().product::<i64>() as usize],
                        &shape,
                    )
                }
            }
        }
        Tensor::from_vec(array.iter().copied().collect(), &shape)
    }
}

impl<'a, T: Element> TryFrom<&'a Tensor> for ArrayViewD<'a, T> {
    type Error = Error;
    fn try_from(t: &'a Tensor) -> Result<Self> {
        t.as_array()
    }
}

impl<T: Element> TryFrom<ArrayD<T>> for Tensor {
    type Error = Error;
    fn try_from(a: ArrayD<T>) -> Result<Self> {
        Tensor::from_array(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr2, Axis};

    #[test]
    fn standard_arrays_move_in_without_copying() {
        let a = arr2(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).into_dyn();
        let ptr = a.as_ptr();
        let t = Tensor::from_array(a).unwrap();
        assert_eq!(t.data_ptr() as *const f32, ptr);
        assert_eq!(t.shape(), &[2, 3]);
        let view = t.as_array::<f32>().unwrap();
        assert_eq!(view[[1, 2]], 6.0);
        assert_eq!(view.as_ptr(), ptr);
    }

    #[test]
    fn transposed_arrays_are_copied_into_c_order() {
        let a = arr2(&[[1i64, 2], [3, 4]]).reversed_axes().into_dyn();
        let t = Tensor::from_array(a).unwrap();
        assert_eq!(t.as_slice::<i64>().unwrap(), &[1, 3, 2, 4]);
        let summed = t.as_array::<i64>().unwrap().sum_axis(Axis(0));
        assert_eq!(summed.as_slice().unwrap(), &[3, 7]);
        assert!(t.as_array::<f32>().is_err());
    }
}
