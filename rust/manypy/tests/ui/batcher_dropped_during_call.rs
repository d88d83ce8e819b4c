// manypy_batcher_free must not race a call on the same batcher: Drop takes
// the batcher by value, so it cannot run while a thread still borrows it
// for a call (asynchronous requests already accepted complete after it).
use manypy::{Batcher, Value};

fn serve(batcher: Batcher, args: Vec<Value>) {
    std::thread::scope(|s| {
        s.spawn(|| batcher.call(&args));
        drop(batcher);
    });
}

fn main() {}
