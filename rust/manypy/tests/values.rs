//! Values and tensors through real interpreters: every kind and every dtype
//! round-trips, dict order is kept, tensors cross without copying, and bad
//! input is an Err.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use manypy::{Code, Complex32, Complex64, DType, Element, Object, Pool, Tensor, Value, BF16, F16};

/// One pool and an echo model for the whole file (interpreters cost a second each).
fn echo() -> &'static (Pool, Object) {
    static ECHO: OnceLock<(Pool, Object)> = OnceLock::new();
    ECHO.get_or_init(|| {
        let pool = Pool::new(1).unwrap();
        let identity = pool
            .load_package(common::archive("identity.pt"))
            .unwrap()
            .load_pickle("model", "model.pkl")
            .unwrap();
        pool.exec_all(
            "import torch\n\
             def echo(x):\n    return x\n\
             kept = []\n",
        )
        .unwrap();
        (pool, identity)
    })
}

#[test]
fn every_value_kind_round_trips_through_python() {
    let (pool, identity) = echo();
    let t = Tensor::from_slice(&[1i64, 2, 3], &[3]).unwrap();
    let value = Value::Dict(vec![
        ("z".into(), Value::None),
        ("b".into(), Value::Bool(true)),
        ("i".into(), Value::Int(-1 << 40)),
        ("f".into(), Value::Float(2.5)),
        ("s".into(), Value::Str("héllo\0world".into())),
        ("y".into(), Value::Bytes(vec![0, 255, 7])),
        ("t".into(), Value::Tensor(t.clone())),
        (
            "l".into(),
            Value::List(vec![Value::Int(1), Value::List(vec![])]),
        ),
        (
            "u".into(),
            Value::Tuple(vec![Value::Str(String::new()), Value::Float(-0.0)]),
        ),
        ("a".into(), Value::Dict(vec![("key".into(), Value::Int(3))])),
    ]);
    // Through an identity model: Python receives and returns it.
    let back = identity.call(std::slice::from_ref(&value)).unwrap();
    assert_eq!(back, value);
    // Keys keep insertion order, not sorted order.
    let Value::Dict(entries) = &back else {
        panic!("not a dict: {back:?}")
    };
    let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["z", "b", "i", "f", "s", "y", "t", "l", "u", "a"]);
    // Python sees the right types.
    assert_eq!(
        pool.eval(Some(0), "echo(type(echo({'a': (1,)})['a']).__name__)")
            .unwrap(),
        Value::from("tuple")
    );
}

fn round_trip<T: Element + PartialEq + std::fmt::Debug>(data: Vec<T>, torch_dtype: &str) {
    let (pool, identity) = echo();
    let t = Tensor::from_slice(&data, &[data.len() as i64]).unwrap();
    let back = common::tensor_of(&identity.call(&[Value::from(&t)]).unwrap());
    assert_eq!(back.dtype(), T::DTYPE);
    assert_eq!(back.as_slice::<T>().unwrap(), &data[..], "{torch_dtype}");
    // Python sees the dtype the Rust type names.
    pool.exec(Some(0), "kept.clear()").unwrap();
    let name = identity
        .call_with(Some("forward"), &[Value::from(&t)], &(), None)
        .and_then(|_| {
            pool.eval(
                Some(0),
                &format!("str(torch.zeros(1, dtype={torch_dtype}).dtype)"),
            )
        })
        .unwrap();
    assert_eq!(name, Value::from(torch_dtype));
}

#[test]
fn every_dtype_of_the_c_api_round_trips() {
    round_trip(vec![-1i8, 0, 127], "torch.int8");
    round_trip(vec![-1i16, 300], "torch.int16");
    round_trip(vec![-1i32, 1 << 20], "torch.int32");
    round_trip(vec![-1i64, 1 << 40], "torch.int64");
    round_trip(vec![0u8, 255], "torch.uint8");
    round_trip(vec![F16(0x3c00), F16(0xc000)], "torch.float16");
    round_trip(vec![1.5f32, -2.0], "torch.float32");
    round_trip(vec![1.5f64, -2.0], "torch.float64");
    round_trip(vec![BF16(0x3f80), BF16(0xc000)], "torch.bfloat16");
    round_trip(vec![Complex32 { re: 1.0, im: -1.0 }], "torch.complex64");
    round_trip(vec![Complex64 { re: 1.0, im: -1.0 }], "torch.complex128");
    round_trip(vec![true, false, true], "torch.bool");
}

#[test]
fn bool_and_strided_tensors_from_python() {
    let (pool, _) = echo();
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 4.0], &[3]).unwrap();
    let m = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let (_, identity) = echo();
    let out = identity
        .call(&[Value::List(vec![Value::from(&x), Value::from(&m)])])
        .unwrap();
    let Value::List(items) = out else { panic!() };
    assert_eq!(
        common::tensor_of(&items[1]).as_slice::<bool>().unwrap(),
        &[true, false, true]
    );
    let m2 = pool
        .eval(Some(0), "torch.tensor([1.0, 2.0, 4.0]) > 1.5")
        .unwrap();
    assert_eq!(
        common::tensor_of(&m2).as_slice::<bool>().unwrap(),
        &[false, true, true]
    );
    let strided = pool
        .eval(
            Some(0),
            "torch.arange(6, dtype=torch.float32).reshape(2, 3).t()",
        )
        .unwrap();
    let strided = common::tensor_of(&strided);
    assert!(!strided.is_contiguous());
    assert_eq!(
        strided.as_slice::<f32>().unwrap_err().code(),
        Code::BadTensor
    );
    assert_eq!(
        strided.to_vec::<f32>().unwrap(),
        vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
}

/// A buffer that counts its drops.
struct Counted(Vec<f32>, Arc<AtomicUsize>);
impl AsMut<[f32]> for Counted {
    fn as_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}
impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn owned_buffers_cross_without_copying_and_are_released_once() {
    let (_, identity) = echo();
    let drops = Arc::new(AtomicUsize::new(0));
    let t = Tensor::from_buffer(Counted(vec![1.0, 2.0, 3.0, 4.0], drops.clone()), &[2, 2]).unwrap();
    let ptr = t.data_ptr();
    let back = common::tensor_of(&identity.call(&[Value::from(&t)]).unwrap());
    // The same memory came back: no copy either way.
    assert_eq!(back.data_ptr(), ptr);
    drop(t);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "the result still uses the buffer"
    );
    drop(back);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "released once, when the last handle went"
    );
}

#[test]
fn dict_keys_with_nul_round_trip() {
    let (pool, identity) = echo();
    // Keys that differ only after a NUL stay apart (a key cut at its NUL
    // would make them one), and come back whole.
    let dict = Value::Dict(vec![
        ("a\0b".into(), Value::Int(1)),
        ("a\0c".into(), Value::Int(2)),
        ("a".into(), Value::Int(3)),
        ("\0".into(), Value::None),
    ]);
    assert_eq!(identity.call(std::slice::from_ref(&dict)).unwrap(), dict);
    // Python's own NUL keys come back whole.
    assert_eq!(
        pool.eval(Some(0), "{'a\\x00b': 1, 'a\\x00c': 2}").unwrap(),
        Value::Dict(vec![
            ("a\0b".into(), Value::Int(1)),
            ("a\0c".into(), Value::Int(2))
        ])
    );
}

#[test]
fn bad_input_is_an_err_not_a_panic() {
    let (pool, identity) = echo();
    assert_eq!(
        Tensor::from_vec(vec![1.0f32; 5], &[2, 3])
            .unwrap_err()
            .code(),
        Code::BadTensor
    );
    assert_eq!(
        Tensor::from_vec(vec![1.0f32; 0], &[-1]).unwrap_err().code(),
        Code::BadTensor
    );
    assert_eq!(
        Tensor::from_vec(vec![1u8; 0], &[i64::MAX, i64::MAX])
            .unwrap_err()
            .code(),
        Code::BadTensor
    );
    assert_eq!(
        Tensor::from_bytes(DType::Bool, &[2], &[1])
            .unwrap_err()
            .code(),
        Code::BadTensor
    );
    let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    assert_eq!(t.as_slice::<f64>().unwrap_err().code(), Code::WrongKind);
    // Nesting deeper than the C API allows is refused before any recursion.
    let mut deep = Value::None;
    for _ in 0..100 {
        deep = Value::List(vec![deep]);
    }
    assert_eq!(
        identity.call(&[deep]).unwrap_err().code(),
        Code::InvalidArgument
    );
    // A Python result the C API cannot represent.
    assert_eq!(
        pool.eval(Some(0), "object()").unwrap_err().code(),
        Code::UnsupportedType
    );
    // An int that does not fit i64.
    assert_eq!(
        pool.eval(Some(0), "2 ** 80").unwrap_err().code(),
        Code::OutOfRange
    );
    assert_eq!(
        i64::try_from(Value::from("x")).unwrap_err().code(),
        Code::WrongKind
    );
    assert_eq!(
        pool.exec(Some(0), "a\0b").unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[cfg(feature = "ndarray")]
#[test]
fn strided_results_view_as_ndarray_in_place() {
    let (pool, _) = echo();
    let t = common::tensor_of(
        &pool
            .eval(
                Some(0),
                "torch.arange(6, dtype=torch.float32).reshape(2, 3).t()",
            )
            .unwrap(),
    );
    let view = t.as_array::<f32>().unwrap();
    assert_eq!(view.shape(), &[3, 2]);
    assert_eq!(view[[2, 1]], 5.0);
    assert_eq!(
        view.as_ptr() as *const u8,
        t.data_ptr(),
        "a view, not a copy"
    );
}
