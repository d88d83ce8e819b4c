//! The collector's exposition, through a `prometheus::Registry` and its
//! `TextEncoder`, against the C library's own (`Pool::prometheus_text`):
//! the same families with the same types and help, the same series (names,
//! label names and values: `code="ok"`, `code="python"`, `pool=...`) and
//! the same values, read from idle pools so that both see the same counts.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use manypy::{CallOptions, Code, Pool};
use manypy_prometheus::PoolCollector;
use prometheus::{Encoder, Registry, TextEncoder};

/// The tests run one at a time: a process has 15 interpreters at most.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn archive(name: &str) -> PathBuf {
    let dir = std::env::var_os("MANYPY_ARCHIVES")
        .expect("MANYPY_ARCHIVES is not set: run through ctest, or set it to <build>/archives");
    PathBuf::from(dir).join(name)
}

/// One exposition: series (name and sorted labels) to value, and family to
/// (type, help).
#[derive(Debug, Default)]
struct Exposition {
    series: BTreeMap<(String, Vec<(String, String)>), f64>,
    families: BTreeMap<String, (String, String)>,
}

/// Parses the text format (what both sides write: no timestamps, label
/// values escaped with backslashes).
fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    let mut help = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, h) = rest.split_once(' ').unwrap();
            help.insert(name.to_owned(), h.to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.families.insert(
                name.to_owned(),
                (kind.to_owned(), help.get(name).cloned().unwrap_or_default()),
            );
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment: {line}");
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), Vec::new()),
            Some((name, rest)) => (
                name.to_owned(),
                parse_labels(rest.strip_suffix('}').expect("a closing brace")),
            ),
        };
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|e| panic!("{line}: {e}")),
        };
        let key = (name, labels);
        assert!(!out.series.contains_key(&key), "a series twice: {line}");
        out.series.insert(key, value);
    }
    out
}

fn parse_labels(mut s: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    while !s.is_empty() {
        let (name, rest) = s
            .split_once("=\"")
            .unwrap_or_else(|| panic!("bad labels at {s}"));
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("an unterminated label value") {
                (_, '\\') => match chars.next().expect("an escape").1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.push((name.to_owned(), value));
        s = rest[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&rest[end + 1..]);
    }
    labels.sort();
    labels
}

fn gathered(registry: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

fn collected(pool: &Pool) -> String {
    let registry = Registry::new();
    registry
        .register(Box::new(PoolCollector::new(pool).unwrap()))
        .unwrap();
    gathered(&registry)
}

/// Both expositions of an idle pool: every series of each is in the other,
/// with the same value (sums to 1e-9 relative: C prints 9 digits), and the
/// families have the same types and help.
fn assert_same(pool: &Pool, rust: &str) {
    let (c_text, rust_text) = (pool.prometheus_text().unwrap(), rust);
    let (c, r) = (parse(&c_text), parse(rust_text));
    let c_names: Vec<_> = c.series.keys().collect();
    let r_names: Vec<_> = r.series.keys().collect();
    assert_eq!(
        r_names, c_names,
        "the series differ\nC:\n{c_text}\nRust:\n{rust_text}"
    );
    for (key, &cv) in &c.series {
        let rv = r.series[key];
        assert!(
            (rv - cv).abs() <= 1e-9 * cv.abs().max(1.0),
            "{key:?}: Rust {rv}, C {cv}"
        );
    }
    assert_eq!(r.families, c.families, "the families differ");
}

fn as_model(model: &str, interpreter: Option<usize>) -> CallOptions {
    let mut builder = CallOptions::builder().context(model, "");
    if let Some(i) = interpreter {
        builder = builder.interpreter(i);
    }
    builder.build().unwrap()
}

fn serve_some_calls(pool: &Pool) {
    for _ in 0..3 {
        pool.exec_with("x = 1", Some(&as_model("m1", None)))
            .unwrap();
    }
    assert_eq!(
        pool.exec_with("raise ValueError('no')", Some(&as_model("m1", Some(0))))
            .unwrap_err()
            .code(),
        Code::Python
    );
    assert_eq!(
        pool.exec_with("x = 1", Some(&as_model("m1", Some(9))))
            .unwrap_err()
            .code(),
        Code::OutOfRange
    );
    pool.exec_with(
        "import time\ntime.sleep(0.02)",
        Some(&as_model("m \"2\"\\", None)),
    )
    .unwrap();
    let model = pool
        .load_package(archive("version_1.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    assert_eq!(
        model.call_method("version", &()).unwrap(),
        manypy::Value::Int(1)
    );
    let stopped = CallOptions::builder()
        .context("m1", "")
        .timeout(std::time::Duration::from_millis(50))
        .build()
        .unwrap();
    assert_eq!(
        pool.exec_with("while True: pass", Some(&stopped))
            .unwrap_err()
            .code(),
        Code::DeadlineExceeded
    );
}

#[test]
fn a_named_pool_is_exported_as_the_c_library_exports_it() {
    let _serial = serial();
    let pool = Pool::builder()
        .interpreters(2)
        .name("svc \"a\"\\b")
        .build()
        .unwrap();
    serve_some_calls(&pool);
    let text = collected(&pool);
    // The names and label values the C exposition uses.
    for line in [
        "# TYPE manypy_requests_total counter",
        "manypy_requests_total{code=\"ok\",model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\"} 3",
        "manypy_requests_total{code=\"python\",model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\"} 1",
        "manypy_requests_total{code=\"out_of_range\",model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\"} 1",
        "manypy_requests_total{code=\"deadline_exceeded\",model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\"} 1",
        "manypy_requests_total{code=\"ok\",model=\"\",pool=\"svc \\\"a\\\"\\\\b\"} 1",
        "# TYPE manypy_request_duration_seconds histogram",
        "manypy_request_duration_seconds_bucket{model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\",le=\"0.0001\"}",
        "manypy_request_duration_seconds_bucket{model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\",le=\"+Inf\"} 5",
        "manypy_queue_duration_seconds_count{model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\"} 5",
        "manypy_inflight_requests{pool=\"svc \\\"a\\\"\\\\b\"} 0",
        "manypy_queued_requests{pool=\"svc \\\"a\\\"\\\\b\"} 0",
        "manypy_interpreters{pool=\"svc \\\"a\\\"\\\\b\",state=\"ready\"} 2",
        "manypy_interpreters{pool=\"svc \\\"a\\\"\\\\b\",state=\"broken\"} 0",
        "manypy_interpreters{pool=\"svc \\\"a\\\"\\\\b\",state=\"lost\"} 0",
        "manypy_draining{pool=\"svc \\\"a\\\"\\\\b\"} 0",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    assert_same(&pool, &text);
    let exposition = parse(&text);
    let sleepy = exposition.series[&(
        "manypy_request_duration_seconds_sum".to_owned(),
        vec![
            ("model".to_owned(), "m \"2\"\\".to_owned()),
            ("pool".to_owned(), "svc \"a\"\\b".to_owned()),
        ],
    )];
    assert!(sleepy >= 0.02, "the sleeping call took {sleepy} s");

    // After a drain: draining, and the refusals counted as "draining".
    pool.drain(None).unwrap();
    assert_eq!(
        pool.exec_with("x = 1", Some(&as_model("m1", None)))
            .unwrap_err()
            .code(),
        Code::Draining
    );
    let text = collected(&pool);
    assert!(
        text.contains("manypy_draining{pool=\"svc \\\"a\\\"\\\\b\"} 1"),
        "{text}"
    );
    assert!(
        text.contains(
            "manypy_requests_total{code=\"draining\",model=\"m1\",pool=\"svc \\\"a\\\"\\\\b\"} 1"
        ),
        "{text}"
    );
    assert_same(&pool, &text);
}

#[test]
fn an_unnamed_pool_has_no_pool_label_and_a_label_can_be_given() {
    let _serial = serial();
    let pool = Pool::new(1).unwrap();
    serve_some_calls(&pool);
    let text = collected(&pool);
    assert!(!text.contains("pool="), "{text}");
    assert!(
        text.contains("manypy_interpreters{state=\"ready\"} 1"),
        "{text}"
    );
    assert!(text.contains("manypy_draining 0"), "{text}");
    assert_same(&pool, &text);

    let registry = Registry::new();
    registry
        .register(Box::new(
            PoolCollector::with_pool_label(&pool, Some("given")).unwrap(),
        ))
        .unwrap();
    let text = gathered(&registry);
    assert!(
        text.contains("manypy_requests_total{code=\"ok\",model=\"m1\",pool=\"given\"} 3"),
        "{text}"
    );
    // The collector keeps its pool alive, and lets it go with the registry.
    let collector = PoolCollector::new(&pool).unwrap();
    assert!(collector.pool().name().is_none());
}

#[test]
fn several_pools_share_a_registry_by_their_names() {
    let _serial = serial();
    let a = Pool::builder().name("a").build().unwrap();
    let b = Pool::builder().name("b").build().unwrap();
    a.exec_with("x = 1", Some(&as_model("m", None))).unwrap();
    let registry = Registry::new();
    registry
        .register(Box::new(PoolCollector::new(&a).unwrap()))
        .unwrap();
    registry
        .register(Box::new(PoolCollector::new(&b).unwrap()))
        .unwrap();
    // The same pool (or label) twice is refused.
    assert!(registry
        .register(Box::new(PoolCollector::new(&a).unwrap()))
        .is_err());
    let text = gathered(&registry);
    assert!(
        text.contains("manypy_requests_total{code=\"ok\",model=\"m\",pool=\"a\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("manypy_interpreters{pool=\"a\",state=\"ready\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("manypy_interpreters{pool=\"b\",state=\"ready\"} 1"),
        "{text}"
    );
    // One HELP and TYPE per family, both pools' series under it.
    assert_eq!(
        text.matches("# TYPE manypy_interpreters gauge").count(),
        1,
        "{text}"
    );
    // Two pools without a label cannot both register.
    let unnamed = Registry::new();
    let c = Pool::new(1).unwrap();
    unnamed
        .register(Box::new(PoolCollector::with_pool_label(&a, None).unwrap()))
        .unwrap();
    assert!(unnamed
        .register(Box::new(PoolCollector::new(&c).unwrap()))
        .is_err());
}
