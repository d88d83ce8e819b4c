//! Serves seed_example.pt (two conv + ReLU, torch.package) from a pool of 2
//! interpreters and 4 threads, each call pinned in turn to interpreter 0
//! and 1, and checks every output against the expected one that eager
//! Python wrote. Exits 0 only if every call was served and matched.
//!
//! Usage: manypy-install-consumer <seed_example.pt> <seed_example.expected.out.bin>
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;

use manypy::{Args, CallOptions, Pool, Tensor, Value};

const INTERPRETERS: usize = 2;
const THREADS: usize = 4;
const CALLS_PER_THREAD: usize = 6;
const OUTPUT_SHAPE: [i64; 4] = [1, 64, 2, 2];
const TOLERANCE: f32 = 1e-4; // absolute + relative

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    let [archive, expected] = paths.as_slice() else {
        eprintln!(
            "usage: manypy-install-consumer <seed_example.pt> <seed_example.expected.out.bin>"
        );
        return ExitCode::from(2);
    };
    match serve(archive, expected) {
        Ok(calls) => {
            println!("ok: {calls} calls from {THREADS} threads on {INTERPRETERS} interpreters, every output matched");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

fn serve(archive: &str, expected_path: &str) -> Result<usize, String> {
    let expected = read_expected(expected_path)?;
    println!(
        "libmanypy {} loaded",
        manypy::library_version().map_err(|e| format!("version check: {e}"))?
    );

    let pool = Pool::builder()
        .interpreters(INTERPRETERS)
        .build()
        .map_err(|e| format!("a pool of {INTERPRETERS} interpreters: {e}"))?;
    let model = pool
        .load_package(archive)
        .and_then(|package| package.load_pickle("model", "model.pkl"))
        .map_err(|e| {
            format!("loading {archive} (package \"model\", resource \"model.pkl\"): {e}")
        })?;
    let model = Arc::new(model);
    println!("{archive} loaded into a pool of {}", pool.size());

    let input = Tensor::from_vec(vec![1.0f32; 100], &[1, 1, 10, 10]).map_err(|e| e.to_string())?;
    // Converted to C once, shared by every thread.
    let args = Arc::new(Args::new(&[Value::from(&input)]).map_err(|e| e.to_string())?);
    let pinned: Vec<CallOptions> = (0..INTERPRETERS)
        .map(|i| CallOptions::builder().interpreter(i).build())
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let (expected, pinned) = (Arc::new(expected), Arc::new(pinned));

    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (model, args, expected, pinned) = (
                model.clone(),
                args.clone(),
                expected.clone(),
                pinned.clone(),
            );
            thread::spawn(move || -> Result<(), String> {
                for call in 0..CALLS_PER_THREAD {
                    let interpreter = (t + call) % INTERPRETERS;
                    let out = model
                        .call_with(None, &*args, &(), Some(&pinned[interpreter]))
                        .map_err(|e| {
                            format!("thread {t}, call {call} on interpreter {interpreter}: {e}")
                        })?;
                    check(&out, &expected).map_err(|why| {
                        format!("thread {t}, call {call} on interpreter {interpreter}: {why}")
                    })?;
                }
                Ok(())
            })
        })
        .collect();
    let mut failures = Vec::new();
    for worker in workers {
        match worker.join() {
            Ok(Ok(())) => {}
            Ok(Err(why)) => failures.push(why),
            Err(_) => failures.push("a serving thread panicked".to_string()),
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("\n  "));
    }
    Ok(THREADS * CALLS_PER_THREAD)
}

/// The expected output: 256 little-endian float32, as make_archives.py writes it.
fn read_expected(path: &str) -> Result<Vec<f32>, String> {
    let bytes =
        std::fs::read(path).map_err(|e| format!("reading the expected output {path}: {e}"))?;
    let count: i64 = OUTPUT_SHAPE.iter().product();
    if bytes.len() != count as usize * 4 {
        return Err(format!(
            "{path} holds {} bytes; {count} float32 ({}) expected",
            bytes.len(),
            count * 4
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

fn check(out: &Value, expected: &[f32]) -> Result<(), String> {
    let tensor = Tensor::try_from(out).map_err(|e| format!("the output is not a tensor: {e}"))?;
    if tensor.shape() != OUTPUT_SHAPE {
        return Err(format!(
            "output shape {:?}, expected {OUTPUT_SHAPE:?}",
            tensor.shape()
        ));
    }
    let values = tensor
        .to_vec::<f32>()
        .map_err(|e| format!("reading the output as float32: {e}"))?;
    for (i, (&got, &want)) in values.iter().zip(expected).enumerate() {
        if (got - want).abs() > TOLERANCE + TOLERANCE * want.abs() {
            return Err(format!(
                "output[{i}] = {got}, expected {want} (tolerance {TOLERANCE} abs + rel)"
            ));
        }
    }
    Ok(())
}
