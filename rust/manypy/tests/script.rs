//! TorchScript on the host: Send + Sync, called from several threads, with
//! outputs checked.
mod common;

use std::thread;

use common::archive;
use manypy::{ScriptModule, Value};

#[test]
fn script_modules_serve_from_threads() {
    let heavy = ScriptModule::load(archive("python_heavy_script.pt")).unwrap();
    let resnet =
        ScriptModule::load_bytes(&std::fs::read(archive("resnet18_script.pt")).unwrap()).unwrap();
    let (x, kwargs) = common::python_heavy_case();
    let image = common::resnet_input();
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                common::check_python_heavy(
                    &heavy
                        .call_with(None, &[Value::from(&x)], &kwargs, None)
                        .unwrap(),
                );
                common::check_resnet(&resnet.call(&[Value::from(&image)]).unwrap());
            });
        }
    });
    assert_eq!(
        heavy
            .call_with(Some("no_such"), &(), &(), None)
            .unwrap_err()
            .code(),
        manypy::Code::NoSuchName
    );
}
