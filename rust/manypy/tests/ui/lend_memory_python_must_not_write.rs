// A model may write what it is lent, during the call and later: from_buffer
// takes only buffers it owns exclusively and may write. Shared data goes in
// with Tensor::from_slice, a copy. (A borrow that ends: lend_borrow_that_ends.rs.)
use manypy::Tensor;
use std::sync::Arc;

static WEIGHTS: [f32; 2] = [1.0, 2.0];

/// What a read-only memory map (memmap2::Mmap) gives: `&[u8]` only.
struct ReadOnlyMap(&'static [u8]);
impl AsRef<[u8]> for ReadOnlyMap {
    fn as_ref(&self) -> &[u8] {
        self.0
    }
}

fn main() {
    let _static = Tensor::from_buffer(&WEIGHTS[..], &[2]);
    let shared: Arc<[f32]> = vec![1.0f32, 2.0].into();
    let _shared = Tensor::from_buffer(shared.clone(), &[2]);
    let _map = Tensor::from_buffer(ReadOnlyMap(b"\x01\x02"), &[2]);
}
