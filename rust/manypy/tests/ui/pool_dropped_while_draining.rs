// manypy_pool_drain must not race manypy_pool_destroy of the same handle:
// drain borrows the pool, so the pool cannot be dropped while a thread
// still drains it (other clones, packages and objects may go meanwhile).
use manypy::Pool;

fn stop(pool: Pool) {
    std::thread::scope(|s| {
        s.spawn(|| pool.drain(None));
        drop(pool);
    });
}

fn main() {}
