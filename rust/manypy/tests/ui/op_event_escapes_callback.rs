// An operator event is valid during its callback only: it cannot be kept.
use std::sync::Mutex;

fn main() {
    static KEPT: Mutex<Option<&'static str>> = Mutex::new(None);
    let _ = manypy::OpCallbacks::new().on_exit(|event| {
        *KEPT.lock().unwrap() = Some(event.name());
    });
}
