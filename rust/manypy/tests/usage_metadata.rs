//! API usage logging, archive metadata, the export hook, operator libraries.
mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use common::archive;
use manypy::{Code, Pool, ScriptModule, Value};

#[test]
fn api_usage_keys_reach_the_handler_once_each() {
    let keys = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = keys.clone();
    manypy::set_api_usage_handler(move |key| log.lock().unwrap().push(key.to_owned())).unwrap();
    let pool = Pool::new(1).unwrap();
    pool.load_package(archive("identity.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    manypy::log_api_usage("rust.test.key").unwrap();
    manypy::log_api_usage("rust.test.key").unwrap();
    pool.exec(
        Some(0),
        "import torch\ntorch._C._log_api_usage_once('rust.test.from_python')",
    )
    .unwrap();
    let seen = keys.lock().unwrap().clone();
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a key came twice: {seen:?}");
    for key in [
        "manypy.pool.create",
        "manypy.package.load",
        "manypy.object.load",
        "rust.test.key",
        "rust.test.from_python",
        "torch.python.import",
    ] {
        assert!(seen.iter().any(|k| k == key), "{key} missing from {seen:?}");
    }
    // A panicking handler: caught, counted, and the process goes on.
    let before = manypy::callback_panics();
    manypy::set_api_usage_handler(|_| panic!("a handler panics on purpose")).unwrap();
    assert!(
        manypy::callback_panics() > before,
        "replayed keys reached the new handler"
    );
    manypy::clear_api_usage_handler().unwrap();
    assert_eq!(
        manypy::log_api_usage("a\0b").unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[test]
fn metadata_is_read_and_written_with_the_export_hook() {
    let dir = std::env::temp_dir().join(format!("manypy-rust-metadata-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    manypy::set_export_hook(|| vec![("build.txt".to_owned(), Value::from("rust-hook"))]).unwrap();

    // TorchScript: saved with extra files and the hook's, read back without Python.
    let script = ScriptModule::load(archive("python_heavy_script.pt")).unwrap();
    let saved = dir.join("script.pt");
    script
        .save(
            &saved,
            &[("info.json", Value::from(b"{\"a\": 1}".as_slice()))],
        )
        .unwrap();
    let files = manypy::archive_list_files(&saved).unwrap();
    assert!(
        files.iter().any(|f| f.ends_with("extra/info.json")),
        "{files:?}"
    );
    assert_eq!(
        manypy::archive_read_file(&saved, "extra/info.json").unwrap(),
        b"{\"a\": 1}"
    );
    assert_eq!(
        manypy::archive_read_file(&saved, "extra/build.txt").unwrap(),
        b"rust-hook"
    );
    assert_eq!(
        manypy::archive_read_file(&saved, "extra/none")
            .unwrap_err()
            .code(),
        Code::NoSuchName
    );
    let reloaded = ScriptModule::load(&saved).unwrap();
    let (x, kwargs) = common::python_heavy_case();
    common::check_python_heavy(
        &reloaded
            .call_with(None, &[Value::from(&x)], &kwargs, None)
            .unwrap(),
    );

    // A package: copied with extra files; the copy loads like the original.
    let pool = Pool::new(1).unwrap();
    let package = pool.load_package(archive("identity.pt")).unwrap();
    assert!(package
        .list_files()
        .unwrap()
        .iter()
        .any(|f| f.ends_with(".data/version")));
    let copy = dir.join("identity_copy.pt");
    package
        .save(&copy, &[("owner.txt", Value::from("team"))])
        .unwrap();
    assert_eq!(
        manypy::archive_read_file(&copy, "extra/owner.txt").unwrap(),
        b"team"
    );
    assert_eq!(
        manypy::archive_read_file(&copy, "extra/build.txt").unwrap(),
        b"rust-hook"
    );
    pool.load_package(&copy)
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();

    // Only bytes and strings are files.
    assert_eq!(
        package
            .save(dir.join("x.pt"), &[("n", Value::Int(1))])
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    // A hook that panics adds nothing, and the save still works.
    manypy::set_export_hook(|| panic!("an export hook panics on purpose")).unwrap();
    let plain = dir.join("plain.pt");
    script.save(&plain, &[]).unwrap();
    assert_eq!(
        manypy::archive_read_file(&plain, "extra/build.txt")
            .unwrap_err()
            .code(),
        Code::NoSuchName
    );
    manypy::clear_export_hook().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn operator_libraries_reach_the_interpreters() {
    let lib_dir = env!("MANYPY_TEST_LIB_DIR");
    let library = std::path::Path::new(lib_dir).join("libmanypy_sample_ops.so");
    assert!(
        library.exists(),
        "the sample operator library is built with manypy: {}",
        library.display()
    );
    assert_eq!(
        manypy::load_operator_library("/no/such/lib.so")
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    manypy::load_operator_library(&library).unwrap();
    let pool = Pool::new(1).unwrap();
    let v = pool
        .eval(Some(0), "__import__('torch').ops.manypy_sample.scaled_add(__import__('torch').ones(3), __import__('torch').ones(3), 2.0).sum().item()")
        .unwrap();
    assert_eq!(v, Value::Float(9.0));
}
