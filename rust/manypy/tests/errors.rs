//! Every C failure is an Err with its code, message, Python type and
//! traceback; every code of the C API is mapped.
mod common;

use std::ffi::CStr;

use common::archive;
use manypy::{sys, Code, Pool, ScriptModule, Value};

#[test]
fn every_code_of_the_c_api_is_mapped_with_its_c_name() {
    manypy::check_library_version().unwrap();
    let c_name = |raw: u32| {
        unsafe { CStr::from_ptr(sys::manypy_code_name(raw)) }
            .to_str()
            .unwrap()
            .to_owned()
    };
    // Every code the library names, up to its last (the header's newest is
    // Draining): a code added to the C API without a Code fails here.
    let known: Vec<u32> = (1..sys::MANYPY_CODE_SLOTS)
        .filter(|&raw| c_name(raw) != "MANYPY_UNKNOWN")
        .collect();
    let last = *known.last().unwrap();
    assert_eq!(last, sys::MANYPY_ERR_DRAINING, "the library's last code");
    assert_eq!(
        known,
        (1..=last).collect::<Vec<_>>(),
        "the codes are contiguous"
    );
    for raw in known {
        let code = Code::from_raw(raw);
        assert_eq!(code.name(), c_name(raw), "code {raw}");
        assert_eq!(code.raw(), Some(raw));
        // The metrics label, as manypy_pool_prometheus writes it.
        assert_eq!(
            manypy::code_label(raw),
            c_name(raw).trim_start_matches("MANYPY_ERR_").to_lowercase()
        );
    }
    assert_eq!(Code::from_raw(sys::MANYPY_ERR_DRAINING), Code::Draining);
    assert_eq!(manypy::code_label(sys::MANYPY_OK), "ok");
    // A code the library does not know either.
    let next = last + 1;
    assert_eq!(Code::from_raw(next), Code::Unknown(next));
    assert_eq!(c_name(next), Code::Unknown(next).name());
    assert_eq!(manypy::code_label(next), "unknown");
}

#[test]
fn python_exceptions_carry_type_and_traceback() {
    let pool = Pool::new(1).unwrap();
    pool.exec_all("def fail():\n    return 1 / 0\n").unwrap();
    let e = pool.eval(Some(0), "fail()").unwrap_err();
    assert_eq!(e.code(), Code::Python);
    assert_eq!(e.python_type(), Some("ZeroDivisionError"));
    assert!(e.message().contains("division by zero"), "{e}");
    let tb = e.traceback().expect("a traceback");
    assert!(tb.contains("in fail"), "{tb}");
    // std::error::Error, with the code in Display.
    let dynamic: Box<dyn std::error::Error + Send + Sync> = Box::new(e.clone());
    assert!(
        dynamic.to_string().starts_with("MANYPY_ERR_PYTHON: "),
        "{dynamic}"
    );

    let e = pool.exec(Some(0), "def broken(:\n").unwrap_err();
    assert_eq!(e.code(), Code::Syntax);
    assert_eq!(e.python_type(), Some("SyntaxError"));
    assert_eq!(
        pool.eval(Some(0), "undefined_name")
            .unwrap_err()
            .python_type(),
        Some("NameError")
    );
    assert_eq!(
        pool.eval(Some(7), "1").unwrap_err().code(),
        Code::OutOfRange
    );
}

#[test]
fn archives_fail_with_their_codes() {
    let pool = Pool::new(1).unwrap();
    let load = |name: &str| pool.load_package(archive(name)).err().map(|e| e.code());
    assert_eq!(load("no_such_file.pt"), Some(Code::NotFound));
    assert_eq!(load("malformed/not_a_zip.pt"), Some(Code::BadArchive));
    assert_eq!(load("malformed/truncated.pt"), Some(Code::BadArchive));
    assert_eq!(load("malformed/plain.zip"), Some(Code::NotAPackage));
    assert_eq!(load("resnet18_script.pt"), Some(Code::NotAPackage));
    assert_eq!(
        load("malformed/future_version.pt"),
        Some(Code::UnsupportedVersion)
    );
    assert_eq!(
        pool.load_package("").unwrap_err().code(),
        Code::InvalidArgument
    );
    assert_eq!(
        pool.load_package_bytes(b"not a zip").unwrap_err().code(),
        Code::BadArchive
    );

    let missing = pool
        .load_package(archive("malformed/missing_extern.pt"))
        .unwrap();
    let e = missing.load_pickle("model", "model.pkl").unwrap_err();
    assert_eq!(e.code(), Code::ModuleNotFound);
    assert_eq!(e.python_type(), Some("ModuleNotFoundError"));
    let corrupt = pool.load_package(archive("malformed/corrupt.pt")).unwrap();
    assert_eq!(
        corrupt
            .load_pickle("model", "model.pkl")
            .unwrap_err()
            .code(),
        Code::BadArchive
    );

    let identity = pool.load_package(archive("identity.pt")).unwrap();
    assert_eq!(
        identity
            .load_pickle("model", "nothing.pkl")
            .unwrap_err()
            .code(),
        Code::NoSuchName
    );
    let model = identity.load_pickle("model", "model.pkl").unwrap();
    assert_eq!(
        model.call_method("no_such_method", &()).unwrap_err().code(),
        Code::NoSuchName
    );
    let e = model.call(&[Value::Int(1), Value::Int(2)]).unwrap_err();
    assert_eq!(
        (e.code(), e.python_type()),
        (Code::Python, Some("TypeError"))
    );
    assert_eq!(
        identity.read_file("no/such/record").unwrap_err().code(),
        Code::NoSuchName
    );

    assert_eq!(
        ScriptModule::load(archive("identity.pt"))
            .unwrap_err()
            .code(),
        Code::BadArchive
    );
    assert_eq!(
        ScriptModule::load(archive("nothing.pt"))
            .unwrap_err()
            .code(),
        Code::NotFound
    );
}

#[test]
fn untrusted_archives_are_refused_before_they_run() {
    let pool = Pool::builder()
        .trust_sha256("00".repeat(32))
        .build()
        .unwrap();
    let e = pool.load_package(archive("identity.pt")).unwrap_err();
    assert_eq!(e.code(), Code::UntrustedArchive);
    // A verifier decides the rest: it sees the digest and the origin.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let pool = Pool::builder()
        .archive_verifier(move |digest, origin| {
            log.lock().unwrap().push((hex(digest), origin.to_owned()));
            origin.ends_with("identity.pt")
        })
        .build()
        .unwrap();
    pool.load_package(archive("identity.pt")).unwrap();
    assert_eq!(
        pool.load_package(archive("stuck.pt")).unwrap_err().code(),
        Code::UntrustedArchive
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0.len(), 64);
    // A panicking verifier refuses, and the panic stays on the Rust side.
    let before = manypy::callback_panics();
    let pool = Pool::builder()
        .archive_verifier(|_, _| panic!("verifier panics on purpose"))
        .build()
        .unwrap();
    assert_eq!(
        pool.load_package(archive("identity.pt"))
            .unwrap_err()
            .code(),
        Code::UntrustedArchive
    );
    assert!(manypy::callback_panics() > before);
    assert_eq!(
        Pool::builder()
            .trust_sha256("xyz")
            .build()
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    assert_eq!(
        Pool::builder().interpreters(0).build().unwrap_err().code(),
        Code::OutOfRange
    );
    assert_eq!(
        Pool::builder()
            .intra_op_threads(0)
            .build()
            .unwrap_err()
            .code(),
        Code::OutOfRange
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
