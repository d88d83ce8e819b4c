//! Children keep their parents alive and handles drop in any order: the
//! last one frees, and whatever is still held keeps working.
mod common;

use std::sync::Arc;
use std::thread;

use common::archive;
use manypy::{CallOptions, CancelToken, Pool, Tensor, Value};

fn identity_args() -> [Value; 1] {
    [Value::from(
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap(),
    )]
}

#[test]
fn an_object_outlives_its_pool_and_package_handles() {
    let pool = Pool::new(1).unwrap();
    let package = pool.load_package(archive("identity.pt")).unwrap();
    let object = package.load_pickle("model", "model.pkl").unwrap();
    drop(pool);
    drop(package);
    let out = object.call(&identity_args()).unwrap();
    assert_eq!(
        common::tensor_of(&out).as_slice::<f32>().unwrap(),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    // The package is still reachable through the object.
    assert!(!object.package().list_files().unwrap().is_empty());
    assert_eq!(object.package().pool().size(), 1);
}

#[test]
fn handles_drop_in_every_order() {
    // Pool (P), package (K), object (O), a result tensor (T), options with a
    // token (C): each permutation of dropping them.
    let orders: [[usize; 5]; 6] = [
        [0, 1, 2, 3, 4],
        [4, 3, 2, 1, 0],
        [2, 0, 4, 1, 3],
        [1, 3, 0, 4, 2],
        [3, 4, 1, 2, 0],
        [0, 2, 1, 4, 3],
    ];
    let pool = Pool::new(1).unwrap(); // keeps the interpreter warm between rounds
    for order in orders {
        let p = pool.clone();
        let k = p.load_package(archive("identity.pt")).unwrap();
        let o = k.load_pickle("model", "model.pkl").unwrap();
        let token = CancelToken::new().unwrap();
        let c = CallOptions::builder()
            .cancel_token(&token)
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap();
        drop(token);
        let t = common::tensor_of(&o.call_with(None, &identity_args(), &(), Some(&c)).unwrap());
        let mut slots: Vec<Option<Box<dyn std::any::Any>>> = vec![
            Some(Box::new(p)),
            Some(Box::new(k)),
            Some(Box::new(o)),
            Some(Box::new(t.clone())),
            Some(Box::new(c)),
        ];
        for i in order {
            slots[i] = None;
        }
        // The tensor's memory is still valid after everything else went.
        assert_eq!(t.as_slice::<f32>().unwrap()[5], 6.0);
    }
}

#[test]
fn an_object_shared_by_threads_is_freed_by_the_last() {
    let pool = Pool::new(2).unwrap();
    let object = Arc::new(
        pool.load_package(archive("identity.pt"))
            .unwrap()
            .load_pickle("model", "model.pkl")
            .unwrap(),
    );
    drop(pool);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let o = object.clone();
            thread::spawn(move || {
                for _ in 0..20 {
                    o.call(&identity_args()).unwrap();
                }
            })
        })
        .collect();
    drop(object); // the threads hold it now
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn scoped_threads_borrow_an_object_without_arc() {
    let pool = Pool::new(2).unwrap();
    let object = pool
        .load_package(archive("identity.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| object.call(&identity_args()).unwrap());
        }
    });
}
