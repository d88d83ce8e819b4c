// A model may keep a tensor past the call and write it later: from_buffer
// takes no borrow that ends, not even a mutable one.
use manypy::Tensor;

fn main() {
    let mut data = vec![1.0f32, 2.0];
    let tensor = Tensor::from_buffer(&mut data[..], &[2]).unwrap();
    drop(data);
    drop(tensor);
}
