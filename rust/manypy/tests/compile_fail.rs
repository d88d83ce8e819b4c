//! Misuse the types make a compile error (trybuild): each file of tests/ui
//! must fail to compile with the error next to it.
#[test]
fn misuse_does_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
