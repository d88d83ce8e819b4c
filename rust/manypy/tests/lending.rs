//! Who may write a tensor's memory (docs/rust.md, "Who may write a lent
//! buffer"): hostile.pt's `scale_in_place(x)` doubles its argument in place
//! (`x.mul_(2)`). Memory Python must not write reaches it only as a copy; an
//! owned buffer is lent without one, and the model's writes show in it after
//! the call; a tensor Rust reads is never written under the reader; a tensor
//! Python holds cannot be read; a result is Rust's alone, even when the model
//! keeps the tensor it returned and changes it later.
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use manypy::{Args, CallOptions, Code, Object, Pool, Tensor, Value};

/// One pool for the file: hostile.pt's model and identity.pt's.
fn models() -> &'static (Pool, Object, Object) {
    static MODELS: OnceLock<(Pool, Object, Object)> = OnceLock::new();
    MODELS.get_or_init(|| {
        let pool = Pool::new(2).unwrap();
        let load = |name| {
            pool.load_package(common::archive(name))
                .unwrap()
                .load_pickle("model", "model.pkl")
                .unwrap()
        };
        let hostile = load("hostile.pt");
        let identity = load("identity.pt");
        (pool, hostile, identity)
    })
}

fn scale_in_place(x: &Tensor) {
    let (_, hostile, _) = models();
    assert_eq!(
        hostile
            .call_method("scale_in_place", &[Value::from(x)])
            .unwrap(),
        Value::None
    );
}

fn echo(x: &Tensor) -> Tensor {
    let (_, _, identity) = models();
    common::tensor_of(&identity.call(&[Value::from(x)]).unwrap())
}

/// In .rodata: a write through it is SIGSEGV. `from_buffer(&SHARED[..])`
/// does not compile (its doc has the compile_fail test); this is the way in.
static SHARED: [f32; 4] = [1.0, 2.0, 3.0, 4.0];

#[test]
fn a_shared_static_borrow_crosses_as_a_copy() {
    let x = Tensor::from_slice(&SHARED, &[4]).unwrap();
    scale_in_place(&x);
    // The host is alive, the static unchanged; the model doubled the copy.
    assert_eq!(SHARED, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(x.as_slice::<f32>().unwrap(), &[2.0, 4.0, 6.0, 8.0]);
}

/// A file of `values` mapped PROT_READ, for as long as it lives.
struct ReadOnlyMap {
    path: std::path::PathBuf,
    addr: *mut libc::c_void,
    len: usize,
}

impl ReadOnlyMap {
    fn new(values: &[f32]) -> ReadOnlyMap {
        let path = std::env::temp_dir().join(format!("manypy_lending_{}.bin", std::process::id()));
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap(); // read-only
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.len(),
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        assert_ne!(
            addr,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        ReadOnlyMap {
            path,
            addr,
            len: bytes.len(),
        }
    }

    fn as_slice(&self) -> &[f32] {
        // Safety: mapped, readable, page-aligned, and never written while
        // `self` lives (the file is ours and the mapping read-only).
        unsafe { std::slice::from_raw_parts(self.addr as *const f32, self.len / 4) }
    }
}

impl Drop for ReadOnlyMap {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.addr, self.len) };
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn a_read_only_memory_map_crosses_as_a_copy() {
    let map = ReadOnlyMap::new(&[1.0, 2.0, 3.0]);
    let x = Tensor::from_slice(map.as_slice(), &[3]).unwrap();
    assert_ne!(x.data_ptr(), map.as_slice().as_ptr() as *const u8, "a copy");
    scale_in_place(&x);
    // Alive, and neither the mapping nor the file changed.
    assert_eq!(map.as_slice(), &[1.0, 2.0, 3.0]);
    let on_disk: Vec<f32> = std::fs::read(&map.path)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(on_disk, [1.0, 2.0, 3.0]);
    assert_eq!(x.as_slice::<f32>().unwrap(), &[2.0, 4.0, 6.0]);
}

#[test]
fn an_owned_vec_is_lent_without_a_copy_and_the_model_may_write_it() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    // Lent: the identity model returns the caller's own memory.
    assert_eq!(echo(&x).data_ptr(), x.data_ptr(), "lent without a copy");
    // Documented behaviour: the model's in-place write reaches the caller's
    // buffer, and a read after the call shows it.
    scale_in_place(&x);
    assert_eq!(x.as_slice::<f32>().unwrap(), &[2.0, 4.0, 6.0]);
    // The same through `from_buffer` and a leaked `&'static mut`.
    let leaked: &'static mut [i64] = Box::leak(vec![5i64, -7].into_boxed_slice());
    let y = Tensor::from_buffer(leaked, &[2]).unwrap();
    scale_in_place(&y);
    assert_eq!(y.as_slice::<i64>().unwrap(), &[10, -14]);
}

#[test]
fn a_tensor_rust_reads_is_never_written_under_the_reader() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let view: &[f32] = x.as_slice().unwrap(); // frozen from here on
    scale_in_place(&x);
    scale_in_place(&x);
    assert_eq!(view, &[1.0, 2.0, 3.0], "the model got a copy");
    assert_ne!(
        echo(&x).data_ptr(),
        x.data_ptr(),
        "a frozen tensor crosses as a copy"
    );
    assert!(!x.is_lent());
}

#[test]
fn a_tensor_python_holds_cannot_be_read() {
    // Prepared Args hold their tensors for as long as they live.
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let args = Args::new(&[Value::from(&x)]).unwrap();
    assert!(x.is_lent());
    let err = x.as_slice::<f32>().unwrap_err();
    assert_eq!(err.code(), Code::TensorLent, "{err}");
    assert_eq!(x.to_vec::<f32>().unwrap_err().code(), Code::TensorLent);
    assert_eq!(x.c_order_bytes().unwrap_err().code(), Code::TensorLent);
    let (_, hostile, _) = models();
    hostile.call_method("scale_in_place", &args).unwrap();
    hostile.call_method("scale_in_place", &args).unwrap();
    // Passed to another call meanwhile, it crosses as a copy.
    assert_ne!(echo(&x).data_ptr(), x.data_ptr());
    drop(args);
    assert!(!x.is_lent());
    assert_eq!(
        x.as_slice::<f32>().unwrap(),
        &[4.0, 8.0],
        "both calls wrote it"
    );

    // A result that is a view of a lent tensor holds it too.
    let y = Tensor::from_vec(vec![3.0f32], &[1]).unwrap();
    let same = echo(&y);
    assert_eq!(same.data_ptr(), y.data_ptr());
    assert_eq!(y.as_slice::<f32>().unwrap_err().code(), Code::TensorLent);
    // Two views of the same memory are equal without reading it.
    assert_eq!(same, y);
    assert_eq!(same.as_slice::<f32>().unwrap(), &[3.0]); // the result is frozen
    scale_in_place(&y); // a copy: y is still lent to the result
    scale_in_place(&same); // a copy: frozen
    assert_eq!(same.as_slice::<f32>().unwrap(), &[3.0]);
    drop(same);
    assert_eq!(y.as_slice::<f32>().unwrap(), &[3.0]);
}

#[test]
fn reads_and_calls_from_many_threads_never_overlap() {
    // Four threads pass one tensor to scale_in_place while a fifth, once 8
    // calls have returned, reads it as soon as it can. Each call either is
    // lent the memory (and doubles it) or gets a copy; once the reader has a
    // view, nothing changes it. The callers go on for 20 calls each after
    // the reader has its view.
    models();
    let x = Tensor::from_vec(vec![1.0f64; 64], &[64]).unwrap();
    let calls = AtomicUsize::new(0);
    let frozen = AtomicBool::new(false);
    let callers_done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut after = 0;
                // (Bounded, should the reader starve on a loaded machine.)
                while after < 20 && calls.load(Ordering::SeqCst) < 20_000 {
                    scale_in_place(&x);
                    calls.fetch_add(1, Ordering::SeqCst);
                    after += frozen.load(Ordering::SeqCst) as usize;
                }
                callers_done.fetch_add(1, Ordering::SeqCst);
            });
        }
        s.spawn(|| {
            while calls.load(Ordering::SeqCst) < 8 {
                std::thread::yield_now();
            }
            let view: &[f64] = loop {
                match x.as_slice::<f64>() {
                    Ok(view) => break view,
                    Err(e) => assert_eq!(e.code(), Code::TensorLent),
                }
                std::thread::yield_now();
            };
            frozen.store(true, Ordering::SeqCst);
            let first = view.to_vec();
            assert!(
                first[0] > 1.0,
                "no call was lent the memory before the read"
            );
            assert!(
                first.iter().all(|&v| v == first[0]),
                "a torn read: {first:?}"
            );
            while callers_done.load(Ordering::SeqCst) < 4 {
                assert_eq!(view, &first[..], "written under the reader");
                std::thread::yield_now();
            }
        });
    });
}

#[test]
fn a_result_the_model_keeps_never_changes_under_its_reader() {
    // hostile.pt's keep(n) returns arange(n) and keeps it, keep_and_return_a_view(n)
    // returns a view of one it keeps, and change_kept(how) then changes what it
    // kept: in place, or by giving it new storage. Its list is per interpreter.
    let (_, hostile, _) = models();
    let on0 = CallOptions::builder().interpreter(0).build().unwrap();
    let call = |method: &str, arg: Value| {
        hostile
            .call_with(Some(method), &[arg], &(), Some(&on0))
            .unwrap()
    };
    for how in ["fill", "resize", "set", "out"] {
        let kept = common::tensor_of(&call("keep", Value::Int(4)));
        let kept_view = common::tensor_of(&call("keep_and_return_a_view", Value::Int(4)));
        let (view, part) = (
            kept.as_slice::<f32>().unwrap(),
            kept_view.as_slice::<f32>().unwrap(),
        );
        assert_eq!(call("change_kept", Value::from(how)), Value::None);
        assert_eq!(
            view,
            &[0.0, 1.0, 2.0, 3.0],
            "{how}: the model changed a result"
        );
        assert_eq!(part, &[1.0, 2.0, 3.0], "{how}: the model changed a result");
    }
}

/// One tensor, the argument of calls running at once on several threads:
/// prepared `Args` lend it once, and every call gets that memory, not a
/// copy (the identity model returns the caller's own memory).
#[test]
fn a_tensor_in_concurrent_calls_from_many_threads_is_not_copied() {
    let (pool, _, identity) = models();
    let x = Tensor::from_vec((0..64).map(|i| i as f32).collect(), &[8, 8]).unwrap();
    let args = Args::new(&[Value::from(&x)]).unwrap();
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (args, start, x) = (&args, &start, &x);
            s.spawn(move || {
                // Both interpreters serve at once; the pinned ones overlap.
                let options = CallOptions::builder()
                    .interpreter(t % pool.size())
                    .build()
                    .unwrap();
                start.wait();
                for _ in 0..50 {
                    let out = identity.call_with(None, args, &(), Some(&options)).unwrap();
                    assert_eq!(
                        common::tensor_of(&out).data_ptr(),
                        x.data_ptr(),
                        "the same memory, no copy"
                    );
                }
            });
        }
    });
    drop(args);
    assert_eq!(x.as_slice::<f32>().unwrap()[63], 63.0);
}
