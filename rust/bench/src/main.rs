//! rust_vs_c: the same libmanypy called from Rust (the safe crate) and from
//! C (the binding benchmarks' shared C side, bindings/bench/c_side.c, built
//! by build.rs), side by side in one process, in alternating rounds, so the
//! ratios come from one run on one machine state.
//!
//!   A. Call overhead: identity.pt (forward(x) -> x) on a [2, 3] tensor, one
//!      thread, p50 latency per call: C; Rust with prepared Args; Rust with
//!      a `&[Value]` converted at each call. Target: Rust (prepared) p50 at
//!      most 0.5 us above C's.
//!   B. Throughput: python_heavy.pt from 2 threads on a pool of 2
//!      interpreters. Target: Rust at least 0.95x C's calls/s.
//!   C, D. Asynchronous calls, Rust against Rust: see async_rounds.rs.
//!
//! A benchmark, not a test: it prints figures and "meets"/"misses" and exits
//! non-zero only when a call fails or an output is wrong.
//!
//! Usage: rust_vs_c [--archives DIR] [--calls N] [--seconds S] [--rounds R]
//!   --calls N    identity calls per path (default 20000)
//!   --seconds S  python_heavy seconds per path (default 4), split over the rounds
//!   --rounds R   alternating rounds (default 4)
use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use manypy::{sys, Args, Kwargs, Object, Pool, Tensor, ThreadMode, Value};

mod async_rounds;

/// bindings/bench/c_side.h; a `c_side_request` is opaque.
#[repr(C)]
struct CSideRequest {
    _opaque: [u8; 0],
}

/// c_side_window: C_SIDE_UNTIL_STOPPED, the window rust_throughput has too.
const C_SIDE_UNTIL_STOPPED: i32 = 1;

extern "C" {
    fn c_side_request_prepared(
        object: *mut sys::manypy_object,
        args: *const sys::manypy_value,
        kwargs: *const sys::manypy_value,
    ) -> *mut CSideRequest;
    fn c_side_request_free(request: *mut CSideRequest);
    fn c_side_latencies(
        request: *const CSideRequest,
        latencies_ns: *mut i64,
        n: usize,
        error: *mut c_char,
        error_size: usize,
    ) -> i32;
    fn c_side_throughput(
        request: *const CSideRequest,
        threads: i32,
        seconds: f64,
        window: i32,
        out_calls: *mut u64,
        out_ns: *mut i64,
        error: *mut c_char,
        error_size: usize,
    ) -> i32;
}

/// A C-side request over prepared args and kwargs (borrowed: they and the
/// object outlive it), freed on drop.
struct CRequest<'a> {
    raw: *mut CSideRequest,
    _borrows: std::marker::PhantomData<(&'a Object, &'a Args, Option<&'a Kwargs>)>,
}

impl<'a> CRequest<'a> {
    fn new(
        object: &'a Object,
        args: &'a Args,
        kwargs: Option<&'a Kwargs>,
    ) -> Result<Self, Failure> {
        let kwargs = kwargs.map_or(std::ptr::null(), |k| k.as_raw());
        let raw = unsafe { c_side_request_prepared(object.as_raw(), args.as_raw(), kwargs) };
        if raw.is_null() {
            return Err("C side: out of memory".into());
        }
        Ok(CRequest {
            raw,
            _borrows: std::marker::PhantomData,
        })
    }
}

impl Drop for CRequest<'_> {
    fn drop(&mut self) {
        unsafe { c_side_request_free(self.raw) }
    }
}

type Failure = Box<dyn std::error::Error>;

fn c_error(buf: &[u8]) -> Failure {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    format!("C side: {}", String::from_utf8_lossy(&buf[..end])).into()
}

fn read_f32(path: &Path) -> Result<Vec<f32>, Failure> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

fn c_latencies(object: &Object, args: &Args, n: usize) -> Result<Vec<i64>, Failure> {
    let request = CRequest::new(object, args, None)?;
    let mut latencies = vec![0i64; n];
    let mut error = [0u8; 512];
    let rc = unsafe {
        c_side_latencies(
            request.raw,
            latencies.as_mut_ptr(),
            n,
            error.as_mut_ptr().cast(),
            error.len(),
        )
    };
    if rc != 0 {
        return Err(c_error(&error));
    }
    Ok(latencies)
}

fn rust_latencies(
    n: usize,
    mut call: impl FnMut() -> manypy::Result<Value>,
) -> Result<Vec<i64>, Failure> {
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let out = call()?;
        // Read the result as the C side does: the tensor's data.
        std::hint::black_box(Tensor::try_from(out)?.data_ptr());
        latencies.push(start.elapsed().as_nanos() as i64);
    }
    Ok(latencies)
}

fn p50_us(samples: &mut [i64]) -> f64 {
    samples.sort_unstable();
    samples[samples.len() / 2] as f64 / 1e3
}

fn c_throughput(
    object: &Object,
    args: &Args,
    kwargs: &Kwargs,
    seconds: f64,
) -> Result<(u64, f64), Failure> {
    let request = CRequest::new(object, args, Some(kwargs))?;
    let (mut calls, mut ns) = (0u64, 0i64);
    let mut error = [0u8; 512];
    let rc = unsafe {
        c_side_throughput(
            request.raw,
            2,
            seconds,
            C_SIDE_UNTIL_STOPPED,
            &mut calls,
            &mut ns,
            error.as_mut_ptr().cast(),
            error.len(),
        )
    };
    if rc != 0 {
        return Err(c_error(&error));
    }
    Ok((calls, ns as f64 / 1e9))
}

fn rust_throughput(
    object: &Object,
    args: &Args,
    kwargs: &Kwargs,
    seconds: f64,
) -> Result<(u64, f64), Failure> {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let counts: Vec<manypy::Result<u64>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(object.call_with(None, args, kwargs, None)?);
                        calls += 1;
                    }
                    Ok(calls)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("a thread panicked"))
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut total = 0;
    for c in counts {
        total += c?;
    }
    Ok((total, elapsed))
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "meets"
    } else {
        "misses"
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("rust_vs_c: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Failure> {
    let mut archives = std::env::var_os("MANYPY_ARCHIVES")
        .map(PathBuf::from)
        .unwrap_or_default();
    let (mut calls, mut seconds, mut rounds) = (20_000usize, 4.0f64, 4usize);
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        let v = argv.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--archives" => archives = v.into(),
            "--calls" => calls = v.parse()?,
            "--seconds" => seconds = v.parse()?,
            "--rounds" => rounds = v.parse()?,
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    if archives.as_os_str().is_empty() {
        return Err("give --archives DIR or set MANYPY_ARCHIVES".into());
    }
    let rounds = rounds.max(1);
    println!(
        "libmanypy {}, {} rounds, alternating C and Rust",
        manypy::library_version()?,
        rounds
    );

    // ---- A: call overhead ------------------------------------------------
    let pool1 = Pool::new(1)?;
    let identity = pool1
        .load_package(archives.join("identity.pt"))?
        .load_pickle("model", "model.pkl")?;
    let input = read_f32(&archives.join("identity.input.bin"))?;
    // Prepared Args hold their tensor for as long as they live, and a tensor
    // that is held crosses into other calls as a copy: the per-call values
    // get a tensor of their own, lent without a copy at each call.
    let args = Args::new(&[Value::from(Tensor::from_vec(input.clone(), &[2, 3])?)])?;
    let values = [Value::from(Tensor::from_vec(input.clone(), &[2, 3])?)];
    let out = identity.call(&args)?;
    if Tensor::try_from(out)?.as_slice::<f32>()? != &input[..] {
        return Err("identity.pt did not return its input".into());
    }
    let per_round = (calls / rounds).max(1);
    // Warm-up: both paths, unmeasured.
    c_latencies(&identity, &args, 1000)?;
    rust_latencies(1000, || identity.call(&args))?;
    let (mut c, mut prepared, mut converted) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which path goes first, so neither always runs warmer.
        if round % 2 == 0 {
            c.extend(c_latencies(&identity, &args, per_round)?);
            prepared.extend(rust_latencies(per_round, || identity.call(&args))?);
            converted.extend(rust_latencies(per_round, || identity.call(&values))?);
        } else {
            converted.extend(rust_latencies(per_round, || identity.call(&values))?);
            prepared.extend(rust_latencies(per_round, || identity.call(&args))?);
            c.extend(c_latencies(&identity, &args, per_round)?);
        }
    }
    let (c50, p50, v50) = (
        p50_us(&mut c),
        p50_us(&mut prepared),
        p50_us(&mut converted),
    );
    println!(
        "A. identity.pt [2, 3], 1 thread, {} calls per path, p50 per call:",
        c.len()
    );
    println!("   C                          {c50:8.2} us");
    println!(
        "   Rust, prepared Args        {p50:8.2} us  ({:+.2} us vs C, target <= +0.50: {})",
        p50 - c50,
        verdict(p50 - c50 <= 0.5)
    );
    println!(
        "   Rust, &[Value] per call    {v50:8.2} us  ({:+.2} us vs C)",
        v50 - c50
    );

    // ---- B: throughput -------------------------------------------------------
    let pool2 = Pool::new(2)?;
    let heavy = pool2
        .load_package(archives.join("python_heavy.pt"))?
        .load_pickle("model", "model.pkl")?;
    let hx = Tensor::from_vec(
        read_f32(&archives.join("python_heavy.input.bin"))?,
        &[4, 64],
    )?;
    let hargs = Args::new(&[Value::from(hx)])?;
    let hkwargs = Kwargs::new(&[("steps", Value::Int(5)), ("normalize", Value::Bool(false))])?;
    let expected = read_f32(&archives.join("python_heavy.expected.logits.bin"))?;
    for i in 0..2 {
        let options = manypy::CallOptions::builder().interpreter(i).build()?;
        let out = heavy.call_with(None, &hargs, &hkwargs, Some(&options))?;
        let logits = Tensor::try_from(out.get("logits").ok_or("no logits")?)?.to_vec::<f32>()?;
        let scale = expected.iter().fold(0f32, |m, e| m.max(e.abs()));
        if logits
            .iter()
            .zip(&expected)
            .any(|(g, e)| (g - e).abs() > 1e-4 * (e.abs() + scale))
        {
            return Err(format!("python_heavy.pt: wrong output on interpreter {i}").into());
        }
    }
    let slice = seconds / rounds as f64;
    let (mut c_calls, mut c_time, mut r_calls, mut r_time) = (0u64, 0f64, 0u64, 0f64);
    for round in 0..rounds {
        let mut c_round = || -> Result<(), Failure> {
            let (n, t) = c_throughput(&heavy, &hargs, &hkwargs, slice)?;
            c_calls += n;
            c_time += t;
            Ok(())
        };
        if round % 2 == 0 {
            c_round()?;
        }
        let (n, t) = rust_throughput(&heavy, &hargs, &hkwargs, slice)?;
        r_calls += n;
        r_time += t;
        if round % 2 == 1 {
            let (n, t) = c_throughput(&heavy, &hargs, &hkwargs, slice)?;
            c_calls += n;
            c_time += t;
        }
    }
    let (c_rate, r_rate) = (c_calls as f64 / c_time, r_calls as f64 / r_time);
    println!("B. python_heavy.pt, 2 threads on 2 interpreters, {seconds:.1} s per path:");
    println!("   C                          {c_rate:8.1} calls/s");
    println!(
        "   Rust                       {r_rate:8.1} calls/s  ({:.3}x C, target >= 0.95x: {})",
        r_rate / c_rate,
        verdict(r_rate / c_rate >= 0.95)
    );

    // ---- C: an asynchronous call's round trip --------------------------------
    let handoff_pool = Pool::builder()
        .interpreters(1)
        .thread_mode(ThreadMode::Handoff)
        .build()?;
    let handoff = handoff_pool
        .load_package(archives.join("identity.pt"))?
        .load_pickle("model", "model.pkl")?;
    async_rounds::round_trips(1000, || async_rounds::async_call(&identity, &args))?;
    async_rounds::round_trips(1000, || handoff.call(&args))?;
    let (mut direct, mut handed, mut round_trip) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // The three paths, in reverse order every other round.
        for k in 0..3 {
            let path = if round % 2 == 0 { k } else { 2 - k };
            let samples = match path {
                0 => async_rounds::round_trips(per_round, || identity.call(&args))?,
                1 => async_rounds::round_trips(per_round, || handoff.call(&args))?,
                _ => async_rounds::round_trips(per_round, || {
                    async_rounds::async_call(&identity, &args)
                })?,
            };
            [&mut direct, &mut handed, &mut round_trip][path].extend(samples);
        }
    }
    let (d50, h50, a50) = (
        p50_us(&mut direct),
        p50_us(&mut handed),
        p50_us(&mut round_trip),
    );
    println!(
        "C. identity.pt [2, 3], 1 thread, prepared Args, {} calls per path, p50 per call:",
        direct.len()
    );
    println!("   Rust call, DIRECT          {d50:8.2} us");
    println!("   Rust call, HANDOFF         {h50:8.2} us");
    println!(
        "   Rust call_async, waited    {a50:8.2} us  ({:+.2} us vs HANDOFF, target <= +1.00: {}; {:+.2} us vs DIRECT)",
        a50 - h50,
        verdict(a50 - h50 <= 1.0),
        a50 - d50
    );
    drop(handoff);
    drop(handoff_pool);
    drop(identity);
    drop(pool1);

    // ---- D: calls in flight from one thread against threads -----------------
    let (mut a_calls, mut a_time, mut t_calls, mut t_time) = (0u64, 0f64, 0u64, 0f64);
    for round in 0..rounds {
        let mut in_flight = || -> Result<(), Failure> {
            let (n, t) = async_rounds::in_flight(&heavy, &hargs, &hkwargs, 64, slice)?;
            a_calls += n;
            a_time += t;
            Ok(())
        };
        if round % 2 == 0 {
            in_flight()?;
        }
        let (n, t) = async_rounds::threads(&heavy, &hargs, &hkwargs, 4, slice)?;
        t_calls += n;
        t_time += t;
        if round % 2 == 1 {
            in_flight()?;
        }
    }
    let (a_rate, t_rate) = (a_calls as f64 / a_time, t_calls as f64 / t_time);
    println!("D. python_heavy.pt on 2 interpreters, {seconds:.1} s per path:");
    println!("   4 threads, synchronous     {t_rate:8.1} calls/s");
    println!(
        "   1 thread, 64 in flight     {a_rate:8.1} calls/s  ({:.3}x, target >= 0.95x: {})",
        a_rate / t_rate,
        verdict(a_rate / t_rate >= 0.95)
    );
    Ok(())
}
