//! The host trust (set_host_archive_trust): what every host load checks,
//! with or without a trust of its own (both must accept), TorchScript's and
//! AOTInductor's. It is
//! process-wide, so it has this file, a process of its own, to itself, and
//! its one test resets it on every path out (a guard), so that nothing
//! after a failure inherits it.
//!
//! Where this build has no AOTInductor (torch 1.13, no .pt2 in the
//! archives), the TorchScript half runs as everywhere, and AOTInductor loads
//! are checked to be refused, with UnsupportedVersion once the host trust is
//! cleared.
mod common;

use std::path::Path;

use common::archive;
use manypy::{AotiModule, ArchiveTrust, Code, ScriptModule, Tensor, Value};

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

/// Clears the host trust when dropped, a failed assertion included.
struct ClearHostTrust;

impl Drop for ClearHostTrust {
    fn drop(&mut self) {
        manypy::clear_host_archive_trust().unwrap();
    }
}

fn untrusted<T: std::fmt::Debug>(result: manypy::Result<T>, digest: &str, what: &str) {
    let e = result.expect_err(what);
    assert_eq!(e.code(), Code::UntrustedArchive, "{what}: {e}");
    assert!(
        e.message().contains(digest),
        "{what}: {e} should give the digest {digest}"
    );
}

/// invert_script.pt's forward: ~mask.
fn check_inverts(module: &ScriptModule) {
    let mask = Tensor::from_slice(&[true, false, true], &[3]).unwrap();
    let out = Tensor::try_from(module.call(&[Value::from(&mask)]).unwrap()).unwrap();
    assert_eq!(out.to_vec::<bool>().unwrap(), vec![false, true, false]);
}

#[test]
fn the_host_trust_covers_every_host_load_given_none() {
    let _reset = ClearHostTrust;
    let script = archive("invert_script.pt");
    let script_digest = sha256_hex(&script);
    let script_bytes = std::fs::read(&script).unwrap();
    let other = ArchiveTrust::builder()
        .sha256("0".repeat(64))
        .build()
        .unwrap();
    let right = ArchiveTrust::builder()
        .sha256(&script_digest)
        .build()
        .unwrap();

    // No host trust: nothing is checked.
    check_inverts(&ScriptModule::load(&script).unwrap());

    // TorchScript: loads given no trust check the host trust.
    manypy::set_host_archive_trust(&other).unwrap();
    untrusted(
        ScriptModule::load(&script),
        &script_digest,
        "ScriptModule::load",
    );
    untrusted(
        ScriptModule::load_bytes(&script_bytes),
        &script_digest,
        "ScriptModule::load_bytes",
    );
    // The library keeps a copy: dropping the caller's changes nothing.
    drop(other);
    untrusted(
        ScriptModule::load(&script),
        &script_digest,
        "after the trust was dropped",
    );
    // A trust given to the load cannot widen the host trust: both must accept.
    untrusted(
        ScriptModule::load_trusted(&script, &right),
        &script_digest,
        "a trust of the load's own",
    );
    untrusted(
        ScriptModule::load_bytes_trusted(&script_bytes, &right),
        &script_digest,
        "the same, bytes",
    );
    // Setting another replaces it; with both accepting, a load's own trust loads.
    manypy::set_host_archive_trust(&right).unwrap();
    check_inverts(&ScriptModule::load_bytes(&script_bytes).unwrap());
    check_inverts(&ScriptModule::load_trusted(&script, &right).unwrap());
    untrusted(
        ScriptModule::load(archive("loop_script.pt")),
        &sha256_hex(&archive("loop_script.pt")),
        "loop_script.pt",
    );

    // A verifier in the host trust is asked with the load's origin.
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = asked.clone();
    let verifying = ArchiveTrust::builder()
        .verifier(move |_, origin| {
            log.lock().unwrap().push(origin.to_owned());
            origin == "<bytes>"
        })
        .build()
        .unwrap();
    manypy::set_host_archive_trust(&verifying).unwrap();
    drop(verifying);
    untrusted(
        ScriptModule::load(&script),
        &script_digest,
        "refused by the host verifier",
    );
    check_inverts(&ScriptModule::load_bytes(&script_bytes).unwrap());
    assert_eq!(
        *asked.lock().unwrap(),
        vec![script.to_str().unwrap().to_owned(), "<bytes>".to_owned()]
    );

    // AOTInductor packages: the same, where this build runs them.
    let other = ArchiveTrust::builder()
        .sha256("0".repeat(64))
        .build()
        .unwrap();
    manypy::set_host_archive_trust(&other).unwrap();
    let package = archive("python_heavy.pt2");
    if package.exists() {
        let digest = sha256_hex(&package);
        let bytes = std::fs::read(&package).unwrap();
        let right = ArchiveTrust::builder().sha256(&digest).build().unwrap();
        untrusted(AotiModule::load(&package), &digest, "AotiModule::load");
        untrusted(
            AotiModule::load_bytes(&bytes),
            &digest,
            "AotiModule::load_bytes",
        );
        // Both must accept: a trust of the load's own does not widen the host's.
        untrusted(
            AotiModule::load_trusted(&package, &right),
            &digest,
            "a trust of the load's own",
        );
        untrusted(
            AotiModule::load_bytes_trusted(&bytes, &right),
            &digest,
            "the same, bytes",
        );
        // A trust given to the load is checked too, and refuses what the host
        // trust accepts.
        manypy::set_host_archive_trust(&right).unwrap();
        AotiModule::load(&package).unwrap();
        AotiModule::load_bytes_trusted(&bytes, &right).unwrap();
        untrusted(
            AotiModule::load_trusted(&package, &other),
            &digest,
            "a refusing trust given to the load",
        );
        manypy::clear_host_archive_trust().unwrap();
        AotiModule::load_bytes(&bytes).unwrap();
    } else {
        // Without AOTInductor nothing loads: refused by the host trust or
        // for the version (the header does not order the two), and for the
        // version once the host trust is cleared.
        let e = AotiModule::load(&script).unwrap_err();
        assert!(
            matches!(e.code(), Code::UntrustedArchive | Code::UnsupportedVersion),
            "{e}"
        );
        manypy::clear_host_archive_trust().unwrap();
        let e = AotiModule::load(&script).unwrap_err();
        assert_eq!(e.code(), Code::UnsupportedVersion, "{e}");
        assert!(e.message().contains("torch 2.6 or newer"), "{e}");
    }

    // Cleared: TorchScript loads check nothing again.
    manypy::clear_host_archive_trust().unwrap();
    check_inverts(&ScriptModule::load(&script).unwrap());
}
