//! Compile-time behaviour of the attributes (trybuild): every tricky valid shape in
//! `ui/pass` compiles and runs; every file in `ui/fail` makes one mistake and gets one
//! diagnostic at the offending token. Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test --test ui`, then review the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
