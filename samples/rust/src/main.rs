//! serve_model: serves python_heavy.pt (a model whose cost is Python) from N
//! threads, first through a pool of 1 interpreter (one GIL, as a plain
//! embedded Python would be), then through a pool of N, and prints
//! throughput and p50/p99 latency for each. Every interpreter's output is
//! checked against eager Python's before timing; a wrong output or a failed
//! call exits non-zero. Timings are printed, never checked.
//!
//! Usage: serve_model [--archives DIR] [--threads N] [--seconds S]
//!   --archives DIR  the build's sample archives (default: $MANYPY_ARCHIVES)
//!   --threads N     serving threads, and interpreters of the second pool (default 2)
//!   --seconds S     measured seconds per configuration (default 3)
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use manypy::{Args, CallOptions, Kwargs, Object, Pool, Tensor, Value};

struct Options {
    archives: PathBuf,
    threads: usize,
    seconds: f64,
}

fn parse() -> Result<Options, String> {
    let mut options = Options {
        archives: std::env::var_os("MANYPY_ARCHIVES")
            .map(PathBuf::from)
            .unwrap_or_default(),
        threads: 2,
        seconds: 3.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--archives" => options.archives = value.into(),
            "--threads" => {
                options.threads = value.parse().map_err(|e| format!("--threads: {e}"))?
            }
            "--seconds" => {
                options.seconds = value.parse().map_err(|e| format!("--seconds: {e}"))?
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if options.archives.as_os_str().is_empty() {
        return Err("give --archives DIR or set MANYPY_ARCHIVES".into());
    }
    if options.threads == 0 || options.seconds.is_nan() || options.seconds <= 0.0 {
        return Err("--threads and --seconds must be positive".into());
    }
    Ok(options)
}

fn read_f32(path: &Path) -> Result<Vec<f32>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// The model's inputs and expected outputs (samples/models/README.md).
struct Case {
    args: Args,
    kwargs: Kwargs,
    logits: Vec<f32>,
    norm: Vec<f32>,
}

fn case(dir: &Path) -> Result<Case, Box<dyn std::error::Error>> {
    let x = Tensor::from_vec(read_f32(&dir.join("python_heavy.input.bin"))?, &[4, 64])?;
    Ok(Case {
        args: Args::new(&[Value::from(x)])?,
        kwargs: Kwargs::new(&[("steps", Value::Int(5)), ("normalize", Value::Bool(false))])?,
        logits: read_f32(&dir.join("python_heavy.expected.logits.bin"))?,
        norm: read_f32(&dir.join("python_heavy.expected.norm.bin"))?,
    })
}

fn close(got: &[f32], expected: &[f32]) -> bool {
    let scale = expected.iter().fold(0f32, |m, e| m.max(e.abs()));
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(g, e)| (g - e).abs() <= 1e-4 * (e.abs() + scale))
}

/// Checks the model's output on every interpreter of its pool.
fn check(
    model: &Object,
    case: &Case,
    interpreters: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    for i in 0..interpreters {
        let options = CallOptions::builder().interpreter(i).build()?;
        let out = model.call_with(None, &case.args, &case.kwargs, Some(&options))?;
        let get = |key: &str| -> Result<Vec<f32>, Box<dyn std::error::Error>> {
            Ok(Tensor::try_from(out.get(key).ok_or(format!("no {key}"))?)?.to_vec::<f32>()?)
        };
        if !close(&get("logits")?, &case.logits) || !close(&get("norm")?, &case.norm) {
            return Err(format!("interpreter {i}: output differs from eager Python's").into());
        }
    }
    Ok(())
}

struct Run {
    calls: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

/// Calls `model` from `threads` threads for `seconds`.
fn serve(model: &Object, case: &Case, threads: usize, seconds: f64) -> Result<Run, manypy::Error> {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let per_thread: Vec<Result<Vec<Duration>, manypy::Error>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut latencies = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        model.call_with(None, &case.args, &case.kwargs, None)?;
                        latencies.push(t.elapsed());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("a serving thread panicked"))
            .collect()
    });
    let elapsed = start.elapsed();
    let mut latencies = Vec::new();
    for r in per_thread {
        latencies.extend(r?);
    }
    latencies.sort();
    Ok(Run {
        calls: latencies.len(),
        elapsed,
        latencies,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn main() {
    if let Err(e) = run() {
        eprintln!("serve_model: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let options = parse()?;
    let case = case(&options.archives)?;
    let archive = options.archives.join("python_heavy.pt");
    println!(
        "python_heavy.pt from {} threads, {:.1} s per configuration (libmanypy {})",
        options.threads,
        options.seconds,
        manypy::library_version()?
    );
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "configuration", "calls/s", "p50 ms", "p99 ms"
    );
    let mut throughput = Vec::new();
    for interpreters in [1, options.threads] {
        let pool = Pool::new(interpreters)?;
        let model = pool
            .load_package(&archive)?
            .load_pickle("model", "model.pkl")?;
        check(&model, &case, interpreters)?; // also starts every interpreter
        let run = serve(&model, &case, options.threads, options.seconds)?;
        let rate = run.calls as f64 / run.elapsed.as_secs_f64();
        throughput.push(rate);
        println!(
            "{:<28} {:>10.1} {:>10.3} {:>10.3}",
            format!(
                "{interpreters} interpreter(s) x {} threads",
                options.threads
            ),
            rate,
            percentile(&run.latencies, 0.50),
            percentile(&run.latencies, 0.99)
        );
    }
    println!(
        "speed-up with {} interpreters: {:.2}x",
        options.threads,
        throughput[1] / throughput[0]
    );
    Ok(())
}
