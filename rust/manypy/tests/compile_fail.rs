//! Misuse the types make a compile error (trybuild): each file of tests/ui
//! must fail to compile with the error next to it.
#[test]
#[ignore = "slow: compiles each misuse in a crate of its own; rust_tests runs it (--include-ignored)"]
fn misuse_does_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
