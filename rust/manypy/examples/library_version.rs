//! Prints the version of the libmanypy this program loaded, or why the
//! binding refuses it (exit status 2). tests/version_mismatch.rs runs it
//! against a fake library of another version.
use manypy::{Code, Pool};

fn main() {
    match manypy::library_version() {
        Ok(version) => println!("libmanypy {version}"),
        Err(e) => {
            eprintln!("refused: {e}");
            // Every other entry point refuses the same way: none of them
            // reaches a C function of the mismatched library.
            let pool = Pool::new(1).expect_err("a pool from a mismatched library");
            let token = manypy::CancelToken::new().expect_err("a token from a mismatched library");
            assert_eq!(
                (pool.code(), token.code()),
                (Code::VersionMismatch, Code::VersionMismatch)
            );
            std::process::exit(2);
        }
    }
}
