// A view borrows its tensor: it cannot be used after the tensor is dropped.
use manypy::Tensor;

fn main() {
    let view: &[f32];
    {
        let tensor = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        view = tensor.as_slice::<f32>().unwrap();
    }
    println!("{view:?}");
}
