//! Archive trust: one ArchiveTrust for TorchScript on the host and for
//! pools. Interpreters remember the archives that ran in them, and a pool
//! with an allow-list leases only interpreters whose whole history it trusts
//! (docs/security.md, "Pools with different trust"). So this file, a process
//! of its own as every integration test is, creates no pool that checks
//! nothing, and every pool it creates that accepts identity.pt lists it:
//! whatever order its tests run in, each pool finds interpreters it trusts,
//! and no verifier is asked about what another test ran.
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::archive;
use manypy::{ArchiveTrust, Code, Pool, ScriptModule, Tensor, Value};

/// The archive's SHA-256 as `sha256sum` prints it (the tool users take the
/// digests from, and none of manypy's code).
fn sha256_hex(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum (coreutils) runs");
    assert!(
        out.status.success(),
        "sha256sum {}: {:?}",
        path.display(),
        out
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let digest = text.split_whitespace().next().unwrap().to_owned();
    assert_eq!(digest.len(), 64, "{text}");
    digest
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs invert_script.pt's forward: ~mask.
fn check_inverts(module: &ScriptModule) {
    let mask = Tensor::from_slice(&[true, false, true], &[3]).unwrap();
    let out = Tensor::try_from(module.call(&[Value::from(&mask)]).unwrap()).unwrap();
    assert_eq!(out.to_vec::<bool>().unwrap(), vec![false, true, false]);
}

type Asked = Arc<Mutex<Vec<(String, String)>>>;

/// A verifier that records what it is asked (digest, origin) and refuses.
fn refusing_recorder() -> (
    Asked,
    impl Fn(&[u8; 32], &str) -> bool + Send + Sync + 'static,
) {
    let asked = Asked::default();
    let log = asked.clone();
    let verifier = move |digest: &[u8; 32], origin: &str| {
        log.lock().unwrap().push((hex(digest), origin.to_owned()));
        false
    };
    (asked, verifier)
}

/// Checks that the verifier was asked about `path`, loaded from its file,
/// then from bytes.
fn expect_asked_about_file_then_bytes(asked: &Asked, path: &Path) {
    let digest = sha256_hex(path);
    assert_eq!(
        *asked.lock().unwrap(),
        vec![
            (digest.clone(), path.to_str().unwrap().to_owned()),
            (digest, "<bytes>".to_owned())
        ]
    );
}

/// Counts how often it is dropped: captured by a verifier, it tells when
/// the binding released the verifier.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn an_allow_list_covers_torchscript_on_the_host() {
    let (invert, looping) = (archive("invert_script.pt"), archive("loop_script.pt"));
    let trust = ArchiveTrust::builder()
        .sha256(sha256_hex(&invert))
        .sha256(sha256_hex(&archive("identity.pt")))
        .build()
        .unwrap();

    let e = ScriptModule::load_trusted(&looping, &trust).unwrap_err();
    assert_eq!(e.code(), Code::UntrustedArchive);
    assert!(e.message().contains(&sha256_hex(&looping)), "{e}");
    let loop_bytes = read(&looping);
    let e = ScriptModule::load_bytes_trusted(&loop_bytes, &trust).unwrap_err();
    assert_eq!(e.code(), Code::UntrustedArchive);
    assert!(e.message().contains(&sha256_hex(&looping)), "{e}");
    // The same bytes without a trust: nothing is checked (what the trust is for).
    ScriptModule::load_bytes(&loop_bytes).unwrap();

    // Listed: loads from the file and from bytes, and runs.
    check_inverts(&ScriptModule::load_trusted(&invert, &trust).unwrap());
    check_inverts(&ScriptModule::load_bytes_trusted(&read(&invert), &trust).unwrap());
    // Digits in either case; a clone is the same trust.
    let upper = ArchiveTrust::builder()
        .sha256(sha256_hex(&invert).to_uppercase())
        .build()
        .unwrap();
    check_inverts(&ScriptModule::load_trusted(&invert, &upper.clone()).unwrap());
    assert_eq!(
        ScriptModule::load_trusted(&looping, &upper)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    // An empty trust checks nothing, as the C API's NULL trust.
    ScriptModule::load_trusted(&looping, &ArchiveTrust::builder().build().unwrap()).unwrap();
}

#[test]
fn a_verifier_is_asked_about_what_is_not_listed() {
    let (invert, looping) = (archive("invert_script.pt"), archive("loop_script.pt"));
    let (asked, verifier) = refusing_recorder();
    let trust = ArchiveTrust::builder()
        .sha256(sha256_hex(&invert))
        .verifier(verifier)
        .build()
        .unwrap();
    assert_eq!(
        ScriptModule::load_trusted(&looping, &trust)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    assert_eq!(
        ScriptModule::load_bytes_trusted(&read(&looping), &trust)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    check_inverts(&ScriptModule::load_trusted(&invert, &trust).unwrap()); // listed: not asked
    expect_asked_about_file_then_bytes(&asked, &looping);

    // One that accepts: by origin here.
    let by_path = ArchiveTrust::builder()
        .verifier(|_, origin| origin.ends_with("loop_script.pt"))
        .build()
        .unwrap();
    ScriptModule::load_trusted(&looping, &by_path).unwrap();
    assert_eq!(
        ScriptModule::load_bytes_trusted(&read(&looping), &by_path)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );

    // A panicking verifier refuses, and the panic stays on the Rust side.
    let before = manypy::callback_panics();
    let panicking = ArchiveTrust::builder()
        .verifier(|_, _| panic!("verifier panics on purpose"))
        .build()
        .unwrap();
    assert_eq!(
        ScriptModule::load_trusted(&invert, &panicking)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    assert!(manypy::callback_panics() > before);
}

#[test]
fn the_same_trust_serves_pools() {
    let (identity, runs_code) = (archive("identity.pt"), archive("malformed/runs_code.pt"));
    let (asked, verifier) = refusing_recorder();
    let trust = ArchiveTrust::builder()
        .sha256(sha256_hex(&archive("invert_script.pt")))
        .sha256(sha256_hex(&identity))
        .verifier(verifier)
        .build()
        .unwrap();
    let pool = Pool::builder().trust(&trust).build().unwrap();
    check_inverts(&ScriptModule::load_trusted(archive("invert_script.pt"), &trust).unwrap());

    // runs_code.pt's pickle would write a file: refused before it runs.
    let e = pool.load_package(&runs_code).unwrap_err();
    assert_eq!(e.code(), Code::UntrustedArchive);
    assert!(e.message().contains(&sha256_hex(&runs_code)), "{e}");
    assert_eq!(
        pool.load_package_bytes(&read(&runs_code))
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    expect_asked_about_file_then_bytes(&asked, &runs_code);
    let model = pool
        .load_package(&identity)
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(
        Tensor::try_from(model.call(&[Value::from(&x)]).unwrap())
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![1.0, 2.0]
    );
    drop((model, pool)); // its interpreter goes back: the pools below may take it

    // A trust replaces the digests given before it; digests after it add.
    let only_invert = ArchiveTrust::builder()
        .sha256(sha256_hex(&archive("invert_script.pt")))
        .build()
        .unwrap();
    let replaced = Pool::builder()
        .trust_sha256(sha256_hex(&identity))
        .trust(&only_invert)
        .build()
        .unwrap();
    assert_eq!(
        replaced.load_package(&identity).unwrap_err().code(),
        Code::UntrustedArchive
    );
    let added = Pool::builder()
        .trust(&only_invert)
        .trust_sha256(sha256_hex(&identity))
        .build()
        .unwrap();
    added.load_package(&identity).unwrap();
    assert_eq!(
        added.load_package(&runs_code).unwrap_err().code(),
        Code::UntrustedArchive
    );
}

#[test]
fn bad_digests_are_invalid_arguments() {
    let long = "0".repeat(65);
    let short = "0".repeat(63);
    let not_hex = "g".repeat(64);
    let with_nul = format!("{}\0", "0".repeat(64));
    for bad in ["", "not a digest", &short, &long, &not_hex, &with_nul] {
        let e = ArchiveTrust::builder().sha256(bad).build().unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}: {e}");
    }
    assert_eq!(
        Pool::builder()
            .trust_sha256("xyz")
            .build()
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    // A good one among them does not help.
    let good = sha256_hex(&archive("identity.pt"));
    let e = ArchiveTrust::builder()
        .sha256(good)
        .sha256("xyz")
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

#[test]
fn the_verifier_is_released_exactly_once() {
    let identity = archive("identity.pt");
    let drops = Arc::new(AtomicUsize::new(0));
    let asked = Arc::new(AtomicUsize::new(0));
    let (counter, count) = (DropCounter(drops.clone()), asked.clone());
    let trust = ArchiveTrust::builder()
        .sha256(sha256_hex(&identity))
        .verifier(move |_, _| {
            let _held = &counter;
            count.fetch_add(1, Ordering::SeqCst);
            false
        })
        .build()
        .unwrap();
    let copy = trust.clone();
    let pool = Pool::builder().trust(&trust).build().unwrap();
    assert_eq!(
        ScriptModule::load_trusted(archive("loop_script.pt"), &copy)
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    drop(trust);
    drop(copy);
    // The pool holds the verifier still, and asks it.
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    let before = asked.load(Ordering::SeqCst);
    assert_eq!(
        pool.load_package(archive("malformed/runs_code.pt"))
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    assert_eq!(asked.load(Ordering::SeqCst), before + 1);
    drop(pool);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // A build that fails releases it too, once: the trust's own (a bad
    // digest), and a pool's after its options took the trust (a stop grace
    // too long for C).
    let drops = Arc::new(AtomicUsize::new(0));
    let counter = DropCounter(drops.clone());
    let e = ArchiveTrust::builder()
        .verifier(move |_, _| {
            let _held = &counter;
            false
        })
        .sha256("not a digest")
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let counter = DropCounter(drops.clone());
    let e = Pool::builder()
        .archive_verifier(move |_, _| {
            let _held = &counter;
            false
        })
        .stop_grace(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}
