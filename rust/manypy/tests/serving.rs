//! Packaged ResNet-18 and python_heavy served from 8 threads through one
//! pool of 2 interpreters, every output checked against eager Python's.
mod common;

use std::sync::Arc;
use std::thread;

use common::*;
use manypy::{Args, Kwargs, Pool, Value};

const THREADS: usize = 8;

#[test]
fn resnet18_and_python_heavy_from_eight_threads() {
    let pool = Pool::new(2).unwrap();
    let resnet = Arc::new(
        pool.load_package(archive("resnet18.pt"))
            .unwrap()
            .load_pickle("model", "model.pkl")
            .unwrap(),
    );
    let heavy = Arc::new(
        pool.load_package(archive("python_heavy.pt"))
            .unwrap()
            .load_pickle("model", "model.pkl")
            .unwrap(),
    );
    let (x, kwargs) = python_heavy_case();
    // Prepared once, shared by every thread.
    let heavy_args = Arc::new(Args::new(&[Value::from(&x)]).unwrap());
    let heavy_kwargs = Arc::new(Kwargs::new(&kwargs).unwrap());
    let image = resnet_input();

    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (resnet, heavy) = (resnet.clone(), heavy.clone());
            let (heavy_args, heavy_kwargs, image) =
                (heavy_args.clone(), heavy_kwargs.clone(), image.clone());
            let (x, kwargs) = (x.clone(), kwargs.clone());
            thread::spawn(move || {
                for i in 0..3 {
                    // Alternate the argument forms: converted per call, and prepared.
                    let out = if (t + i) % 2 == 0 {
                        heavy
                            .call_with(None, &[Value::from(&x)], &kwargs, None)
                            .unwrap()
                    } else {
                        heavy
                            .call_with(None, &*heavy_args, &*heavy_kwargs, None)
                            .unwrap()
                    };
                    check_python_heavy(&out);
                }
                check_resnet(&resnet.call(&[Value::from(&image)]).unwrap());
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a serving thread failed");
    }
}
