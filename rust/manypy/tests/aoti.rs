//! AOTInductor packages (.pt2) on the host: AotiModule.
//!
//! Where manypy runs them (a build against torch 2.6 or newer, whose
//! archives hold python_heavy.pt2 and resnet18.pt2, made by
//! samples/models/make_pt2.py): the sample packages against their expected
//! outputs, from files and bytes, from threads and asynchronously (the
//! module dropped with calls in flight); arguments that do not fit; every
//! doctored package of archives/malformed with its code; a trust given to
//! the load; deadlines checked before the model starts, a late result
//! dropped; the per-call operator record with its context; the API usage
//! key; a copy with extra files that loads and computes as the original.
//!
//! Elsewhere (torch 1.13, no .pt2 in the archives) every test asserts
//! instead that loads are refused with `UnsupportedVersion` naming the
//! torch needed: no test passes by skipping.
//!
//! The host trust is process-wide: its tests are in aoti_host_trust.rs, a
//! process of its own.
mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{archive, assert_close, read_f32, tensor_of};
use futures::executor::block_on;
use manypy::{
    AotiModule, ArchiveTrust, Args, CallOptions, CancelToken, Code, Error, OpCallbacks, Tensor,
    Value,
};

/// Whether this build runs AOTInductor packages: its archives hold them
/// where, and only where, it does (samples/CMakeLists.txt).
fn aoti_available() -> bool {
    archive("python_heavy.pt2").exists()
}

/// The refusal of a manypy built without AOTInductor: every load, from a
/// file or bytes, trusted or not, is `UnsupportedVersion` naming the torch
/// needed and the torch it was built against.
fn assert_refused_without_aoti() {
    fn check(result: manypy::Result<AotiModule>, what: &str) {
        let e = result.expect_err(what);
        assert_eq!(e.code(), Code::UnsupportedVersion, "{what}: {e}");
        assert!(e.message().contains("torch 2.6 or newer"), "{what}: {e}");
        assert!(
            e.message().contains("built against torch 1."),
            "{what}: {e}"
        );
    }
    let script = archive("python_heavy_script.pt");
    check(AotiModule::load(&script), "a file");
    check(AotiModule::load_bytes(b"PK\x03\x04"), "bytes");
    let trust = ArchiveTrust::builder()
        .verifier(|_, _| true)
        .build()
        .unwrap();
    check(AotiModule::load_trusted(&script, &trust), "a trusted file");
    check(
        AotiModule::load_bytes_trusted(&std::fs::read(&script).unwrap(), &trust),
        "trusted bytes",
    );
}

/// python_heavy.pt2, or None after asserting the refusal where this build
/// has no AOTInductor: each test then checks that instead.
fn heavy() -> Option<AotiModule> {
    if !aoti_available() {
        assert_refused_without_aoti();
        return None;
    }
    Some(
        AotiModule::load(archive("python_heavy.pt2"))
            .unwrap_or_else(|e| panic!("python_heavy.pt2: {e}")),
    )
}

fn heavy_input() -> Tensor {
    Tensor::from_vec(read_f32("python_heavy.input.bin"), &[4, 64]).unwrap()
}

/// python_heavy.pt2's forward(x) is {"logits": [4, 10], "norm": [4]}.
fn check_heavy(out: &Value, what: &str) {
    let entries =
        Vec::<(String, Value)>::try_from(out).unwrap_or_else(|e| panic!("{what}: {e}: {out:?}"));
    assert_eq!(entries.len(), 2, "{what}: {out:?}");
    let logits = tensor_of(
        out.get("logits")
            .unwrap_or_else(|| panic!("{what}: no logits")),
    );
    assert_eq!(logits.shape(), &[4, 10], "{what}");
    assert_close(
        &logits.to_vec::<f32>().unwrap(),
        &read_f32("python_heavy_pt2.expected.logits.bin"),
        1e-4,
        what,
    );
    let norm = tensor_of(out.get("norm").unwrap_or_else(|| panic!("{what}: no norm")));
    assert_eq!(norm.shape(), &[4], "{what}");
    assert_close(
        &norm.to_vec::<f32>().unwrap(),
        &read_f32("python_heavy_pt2.expected.norm.bin"),
        1e-4,
        what,
    );
}

fn call_heavy_and_check(module: &AotiModule, what: &str) {
    check_heavy(
        &module
            .call(&[Value::from(heavy_input())])
            .unwrap_or_else(|e| panic!("{what}: {e}")),
        what,
    );
}

fn expect_err(result: manypy::Result<Value>, code: Code, needle: &str, what: &str) -> Error {
    let e = result.expect_err(what);
    assert_eq!(e.code(), code, "{what}: {e}");
    assert!(
        e.message().contains(needle),
        "{what}: {e:?} should contain {needle:?}"
    );
    e
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("manypy-rust-aoti-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sha256_hex(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum (coreutils) runs");
    assert!(
        out.status.success(),
        "sha256sum {}: {:?}",
        path.display(),
        out
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn sample_packages_match_their_expected_outputs() {
    let Some(module) = heavy() else { return };
    call_heavy_and_check(&module, "python_heavy.pt2");
    // Again: nothing of the first call stays behind. Prepared Args too.
    let args = Args::new(&[Value::from(heavy_input())]).unwrap();
    check_heavy(
        &module.call(&args).unwrap(),
        "python_heavy.pt2 with prepared Args",
    );
    check_heavy(
        &module.call_with(&args, &(), None).unwrap(),
        "python_heavy.pt2 through call_with",
    );

    // resnet18.pt2 from bytes, which are copied: the buffer may go at once.
    let mut bytes = std::fs::read(archive("resnet18.pt2")).unwrap();
    let resnet = AotiModule::load_bytes(&bytes).unwrap();
    bytes.fill(0);
    drop(bytes);
    let image = Tensor::from_vec(read_f32("resnet18.input.bin"), &[1, 3, 224, 224]).unwrap();
    let out = tensor_of(&resnet.call(&[Value::from(&image)]).unwrap());
    assert_eq!(out.shape(), &[1, 1000]);
    assert_close(
        &out.to_vec::<f32>().unwrap(),
        &read_f32("resnet18_pt2.expected.out.bin"),
        1e-4,
        "resnet18.pt2",
    );
    assert!(format!("{resnet:?}").starts_with("AotiModule"));
}

#[test]
fn metadata_is_what_aotinductor_recorded() {
    let Some(module) = heavy() else { return };
    let metadata: HashMap<String, String> = module.metadata().unwrap();
    assert_eq!(
        metadata.get("AOTI_DEVICE_KEY").map(String::as_str),
        Some("cpu"),
        "{metadata:?}"
    );
    assert_eq!(
        metadata.get("AOTI_PLATFORM").map(String::as_str),
        Some("linux"),
        "{metadata:?}"
    );
    assert!(
        metadata.contains_key("AOTI_CPU_ISA") && metadata.contains_key("AOTI_MACHINE"),
        "{metadata:?}"
    );
    // The package's files are records, listed without Python.
    let files = manypy::archive_list_files(archive("python_heavy.pt2")).unwrap();
    assert!(files.iter().any(|f| f.ends_with(".so")), "{files:?}");
}

#[test]
fn arguments_that_do_not_fit_are_refused_precisely() {
    let Some(module) = heavy() else { return };
    let x = heavy_input();
    expect_err(
        module.call(&[Value::from(&x), Value::from(&x)]),
        Code::InvalidArgument,
        "takes 1 positional arguments (Tensor,), not 2",
        "two tensors",
    );
    expect_err(
        module.call(&()),
        Code::InvalidArgument,
        "not 0",
        "no arguments",
    );
    expect_err(
        module.call(&[Value::from("x")]),
        Code::WrongKind,
        "args[0] must be a tensor",
        "a string",
    );
    expect_err(
        module.call_with(&[Value::from(&x)], &[("steps", Value::from(&x))], None),
        Code::InvalidArgument,
        "'steps', which the model does not take",
        "an extra keyword",
    );
    let short = Tensor::from_vec(vec![0f32; 3 * 64], &[3, 64]).unwrap();
    expect_err(
        module.call(&[Value::from(short)]),
        Code::BadTensor,
        "unmatched dim value at 0",
        "shape [3, 64]",
    );
    let wide = Tensor::from_vec(vec![0f64; 4 * 64], &[4, 64]).unwrap();
    expect_err(
        module.call(&[Value::from(wide)]),
        Code::BadTensor,
        "unmatched dtype",
        "float64",
    );
    // Asynchronous calls are refused at submission: an Err, no future.
    let e = module
        .call_async(&())
        .expect_err("no arguments, asynchronously");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let e = module
        .call_async(&[Value::from("x")])
        .expect_err("a string, asynchronously");
    assert_eq!(e.code(), Code::WrongKind, "{e}");
    // The binding's own checks: a NUL in a path.
    assert_eq!(
        AotiModule::load("a\0b.pt2").unwrap_err().code(),
        Code::InvalidArgument
    );
    assert_eq!(
        AotiModule::load(archive("no_such.pt2")).unwrap_err().code(),
        Code::NotFound
    );
    // The module serves on.
    call_heavy_and_check(&module, "python_heavy.pt2 after refused calls");
}

#[test]
fn doctored_packages_are_refused_with_their_codes() {
    let Some(module) = heavy() else { return };
    let cases = [
        ("malformed/truncated.pt2", Code::BadArchive, "truncated.pt2"),
        (
            "malformed/no_library.pt2",
            Code::NotAPackage,
            "is not an AOTInductor package",
        ),
        (
            "malformed/bad_library.pt2",
            Code::BadArchive,
            "is cut short: its segment",
        ),
        (
            "malformed/missing_dependency.pt2",
            Code::Loader,
            "libtorcx.so",
        ),
        (
            "malformed/cuda_device.pt2",
            Code::UnsupportedVersion,
            "compiled for device 'cuda'",
        ),
        (
            "malformed/other_machine.pt2",
            Code::UnsupportedVersion,
            "compiled for aarch64 CPUs; this host is x86_64",
        ),
        (
            "malformed/aarch64_library.pt2",
            Code::UnsupportedVersion,
            "was compiled for aarch64; this host is x86_64",
        ),
        (
            "malformed/newer_torch.pt2",
            Code::Loader,
            "aoti_torch_get_dtypf",
        ),
        (
            "malformed/exported_only.pt2",
            Code::NotAPackage,
            "holds an exported program but no AOTInductor-compiled model",
        ),
        (
            "python_heavy_script.pt",
            Code::NotAPackage,
            "manypy_script_load_file",
        ),
    ];
    for (file, code, needle) in cases {
        let path = archive(file);
        for (how, result) in [
            ("file", AotiModule::load(&path)),
            (
                "bytes",
                AotiModule::load_bytes(&std::fs::read(&path).unwrap()),
            ),
        ] {
            let e = result.expect_err(file);
            assert_eq!(e.code(), code, "{file} from {how}: {e}");
            // From bytes the origin is "<bytes>", not the file's name.
            if how == "file" || !needle.ends_with(".pt2") {
                assert!(
                    e.message().contains(needle),
                    "{file} from {how}: {e:?} should contain {needle:?}"
                );
            }
        }
    }
    call_heavy_and_check(&module, "python_heavy.pt2 after doctored packages");
}

#[test]
fn a_trust_given_to_the_load_is_checked_first() {
    let Some(_module) = heavy() else { return };
    let path = archive("python_heavy.pt2");
    let digest = sha256_hex(&path);
    let bytes = std::fs::read(&path).unwrap();
    let other = ArchiveTrust::builder()
        .sha256("0".repeat(64))
        .build()
        .unwrap();
    let right = ArchiveTrust::builder()
        .sha256(digest.to_uppercase())
        .build()
        .unwrap();
    for result in [
        AotiModule::load_trusted(&path, &other),
        AotiModule::load_bytes_trusted(&bytes, &other),
    ] {
        let e = result.unwrap_err();
        assert_eq!(e.code(), Code::UntrustedArchive, "{e}");
        assert!(e.message().contains(&digest), "{e}");
    }
    call_heavy_and_check(
        &AotiModule::load_trusted(&path, &right).unwrap(),
        "trusted from a file",
    );
    call_heavy_and_check(
        &AotiModule::load_bytes_trusted(&bytes, &right).unwrap(),
        "trusted from bytes",
    );
    // A verifier is asked about what is not listed, with the origin.
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = asked.clone();
    let verifier = ArchiveTrust::builder()
        .verifier(move |_, origin| {
            log.lock().unwrap().push(origin.to_owned());
            false
        })
        .build()
        .unwrap();
    assert_eq!(
        AotiModule::load_trusted(&path, &verifier)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    assert_eq!(
        AotiModule::load_bytes_trusted(&bytes, &verifier)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    assert_eq!(
        *asked.lock().unwrap(),
        vec![path.to_str().unwrap().to_owned(), "<bytes>".to_owned()]
    );
}

#[test]
fn one_module_serves_many_threads() {
    let Some(module) = heavy() else { return };
    let shared = Args::new(&[Value::from(heavy_input())]).unwrap();
    let good = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..6 {
            let (module, shared, good) = (&module, &shared, &good);
            s.spawn(move || {
                for k in 0..60 {
                    // Prepared arguments shared by every thread, or converted per call.
                    let out = if (t + k) % 2 == 0 {
                        module.call(shared)
                    } else {
                        module.call(&[Value::from(heavy_input())])
                    };
                    check_heavy(&out.unwrap(), "a call from a thread");
                    good.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(good.into_inner(), 6 * 60);
    // The handle moves between threads too.
    std::thread::spawn(move || call_heavy_and_check(&module, "a moved module"))
        .join()
        .unwrap();
}

#[test]
fn deadlines_are_checked_before_the_model_starts_and_when_it_returns() {
    let Some(module) = heavy() else { return };
    let x = [Value::from(heavy_input())];
    // A timeout that passes before the call starts.
    let options = CallOptions::builder()
        .timeout(Duration::from_nanos(1))
        .build()
        .unwrap();
    let started = "before the call started";
    expect_err(
        module.call_with(&x, &(), Some(&options)),
        Code::DeadlineExceeded,
        started,
        "a 1 ns timeout",
    );
    // Asynchronously: refused at submission, no future.
    let e = module
        .call_with_async(&x, &(), Some(&options))
        .expect_err("a 1 ns timeout, asynchronously");
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(e.message().contains(started), "{e}");
    // A token cancelled before the call, the same.
    let token = CancelToken::new().unwrap();
    token.cancel();
    let options = CallOptions::builder().cancel_token(&token).build().unwrap();
    expect_err(
        module.call_with(&x, &(), Some(&options)),
        Code::Cancelled,
        started,
        "a cancelled token",
    );
    let e = module
        .call_with_async(&x, &(), Some(&options))
        .expect_err("a cancelled token, asynchronously");
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    // A generous timeout changes nothing.
    let options = CallOptions::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    check_heavy(
        &module.call_with(&x, &(), Some(&options)).unwrap(),
        "within a timeout",
    );

    // A deadline that passes while the model runs: the operator record's
    // enter callback (before the compiled model starts, after the first
    // check) outlasts the timeout, the model finishes, and its result is
    // dropped.
    let _registration = OpCallbacks::new()
        .on_enter(|e| {
            if e.name() == "manypy::aoti_run" && e.request_id() == "late" {
                std::thread::sleep(Duration::from_millis(400));
            }
        })
        .register()
        .unwrap();
    let options = CallOptions::builder()
        .timeout(Duration::from_millis(150))
        .context("heavy-pt2", "late")
        .build()
        .unwrap();
    expect_err(
        module.call_with(&x, &(), Some(&options)),
        Code::DeadlineExceeded,
        "its result was dropped",
        "a deadline passing while the model runs",
    );
    let e = block_on(module.call_with_async(&x, &(), Some(&options)).unwrap()).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "asynchronously: {e}");
    assert!(
        e.message().contains("its result was dropped"),
        "asynchronously: {e}"
    );
    call_heavy_and_check(&module, "python_heavy.pt2 after late results");
}

#[test]
fn operator_callbacks_see_one_record_per_call_with_its_context() {
    let Some(module) = heavy() else { return };
    let seen = Arc::new(Mutex::new(Vec::<(String, String, usize, Vec<i64>)>::new()));
    let log = seen.clone();
    let registration = OpCallbacks::new()
        .on_exit(move |e| {
            if e.name() == "manypy::aoti_run" && e.request_id() == "req-7" {
                let shape = e
                    .inputs()
                    .next()
                    .map(|i| i.shape().to_vec())
                    .unwrap_or_default();
                log.lock().unwrap().push((
                    e.name().to_owned(),
                    e.model_id().to_owned(),
                    e.inputs().len(),
                    shape,
                ));
            }
        })
        .needs_inputs(true)
        .register()
        .unwrap();
    let options = CallOptions::builder()
        .context("heavy-pt2", "req-7")
        .build()
        .unwrap();
    let x = [Value::from(heavy_input())];
    for _ in 0..3 {
        module.call_with(&x, &(), Some(&options)).unwrap();
    }
    check_heavy(
        &block_on(module.call_with_async(&x, &(), Some(&options)).unwrap()).unwrap(),
        "async with context",
    );
    registration.remove().unwrap();
    let seen = seen.lock().unwrap().clone();
    // One record stands for each call, with its context and its input.
    let expected = (
        "manypy::aoti_run".to_owned(),
        "heavy-pt2".to_owned(),
        1,
        vec![4, 64],
    );
    assert_eq!(seen, vec![expected; 4]);
}

#[test]
fn asynchronous_calls_complete_and_outlive_the_module() {
    let Some(module) = heavy() else { return };
    // Under block_on, with prepared and per-call arguments.
    let args = Args::new(&[Value::from(heavy_input())]).unwrap();
    check_heavy(
        &block_on(module.call_async(&args).unwrap()).unwrap(),
        "call_async",
    );
    check_heavy(
        &block_on(
            module
                .call_with_async(&[Value::from(heavy_input())], &(), None)
                .unwrap(),
        )
        .unwrap(),
        "call_with_async",
    );

    // Calls in flight when the module is dropped: each completes, right.
    let futures: Vec<_> = (0..40).map(|_| module.call_async(&args).unwrap()).collect();
    drop(module);
    drop(args);
    for out in block_on(futures::future::join_all(futures)) {
        check_heavy(&out.unwrap(), "a call that outlived its module");
    }

    // Spawned on a multi-threaded tokio runtime, the module shared by tasks;
    // some futures dropped at once (cancelled if not started yet).
    let module = Arc::new(heavy().unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for k in 0..64 {
            let module = module.clone();
            tasks.push(tokio::spawn(async move {
                let call = module.call_async(&[Value::from(heavy_input())])?;
                if k % 4 == 3 {
                    drop(call);
                    return Ok::<_, Error>(());
                }
                check_heavy(&call.await?, "a call from a tokio task");
                Ok(())
            }));
        }
        for task in tasks {
            task.await.expect("the task panicked").unwrap();
        }
    });
    // The caller's token, cancelled after submission: each call either
    // completed first or ends Cancelled (checked before the model starts).
    let token = CancelToken::new().unwrap();
    let options = CallOptions::builder().cancel_token(&token).build().unwrap();
    let calls: Vec<_> = (0..16)
        .map(|_| {
            module
                .call_with_async(&[Value::from(heavy_input())], &(), Some(&options))
                .unwrap()
        })
        .collect();
    token.cancel();
    for outcome in block_on(futures::future::join_all(calls)) {
        match outcome {
            Ok(out) => check_heavy(&out, "a call that finished before its token was cancelled"),
            Err(e) => assert_eq!(e.code(), Code::Cancelled, "{e}"),
        }
    }
    call_heavy_and_check(&module, "python_heavy.pt2 after asynchronous calls");
}

#[test]
fn loads_log_their_api_usage_key() {
    let Some(module) = heavy() else { return };
    let keys = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = keys.clone();
    // Keys already logged are replayed to a new handler: the load above.
    manypy::set_api_usage_handler(move |key| log.lock().unwrap().push(key.to_owned())).unwrap();
    drop(AotiModule::load(archive("python_heavy.pt2")).unwrap());
    manypy::clear_api_usage_handler().unwrap();
    let keys = keys.lock().unwrap();
    assert_eq!(
        keys.iter().filter(|k| *k == "manypy.aoti.load").count(),
        1,
        "{keys:?}"
    );
    drop(module);
}

/// On both legs: a copy of any archive with extra files and the export
/// hook's; the copy loads like the original (a .pt2 where AOTInductor
/// runs, a TorchScript archive everywhere), under a digest of its own.
#[test]
fn a_saved_copy_carries_extra_files_and_loads_like_the_original() {
    let dir = temp_dir("copy");
    manypy::set_export_hook(|| {
        vec![(
            "producer_info.json".to_owned(),
            Value::from("{\"producer\": \"rust\"}"),
        )]
    })
    .unwrap();
    let extra = [
        ("note.txt", Value::from("served by manypy")),
        ("raw.bin", Value::from(&b"\x00\x01"[..])),
    ];

    let script = archive("python_heavy_script.pt");
    let script_copy = dir.join("heavy_script_stamped.pt");
    manypy::archive_save_copy(&script, &script_copy, &extra).unwrap();

    let pt2_copy = dir.join("heavy_stamped.pt2");
    if aoti_available() {
        manypy::archive_save_copy(archive("python_heavy.pt2"), &pt2_copy, &extra).unwrap();
    }
    // Only bytes and strings are files; a place that cannot be written is NotFound.
    let e =
        manypy::archive_save_copy(&script, dir.join("x.pt"), &[("n", Value::Int(1))]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let e = manypy::archive_save_copy(&script, dir.join("no/such/dir/x.pt"), &[]).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let e = manypy::archive_save_copy(dir.join("absent.pt"), dir.join("y.pt"), &[]).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    manypy::clear_export_hook().unwrap();

    let mut copies = vec![script_copy.clone()];
    if aoti_available() {
        copies.push(pt2_copy.clone());
    }
    for copy in &copies {
        assert_eq!(
            manypy::archive_read_file(copy, "extra/note.txt").unwrap(),
            b"served by manypy",
            "{copy:?}"
        );
        assert_eq!(
            manypy::archive_read_file(copy, "extra/raw.bin").unwrap(),
            b"\x00\x01",
            "{copy:?}"
        );
        assert_eq!(
            manypy::archive_read_file(copy, "extra/producer_info.json").unwrap(),
            b"{\"producer\": \"rust\"}",
            "{copy:?}"
        );
    }
    let (x, kwargs) = common::python_heavy_case();
    let reloaded = manypy::ScriptModule::load(&script_copy).unwrap();
    common::check_python_heavy(
        &reloaded
            .call_with(None, &[Value::from(&x)], &kwargs, None)
            .unwrap(),
    );

    if aoti_available() {
        call_heavy_and_check(
            &AotiModule::load(&pt2_copy).unwrap(),
            "the saved copy of python_heavy.pt2",
        );
        // Its digest is its own: a trust of the original's refuses it.
        let original = ArchiveTrust::builder()
            .sha256(sha256_hex(&archive("python_heavy.pt2")))
            .build()
            .unwrap();
        assert_ne!(
            sha256_hex(&pt2_copy),
            sha256_hex(&archive("python_heavy.pt2"))
        );
        assert_eq!(
            AotiModule::load_trusted(&pt2_copy, &original)
                .unwrap_err()
                .code(),
            Code::UntrustedArchive
        );
    } else {
        assert_refused_without_aoti();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
