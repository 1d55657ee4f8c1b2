//! Locations: bytes → str → `Path::parse`. A path that parses prints in
//! canonical form, and the canonical form parses back to the same path
//! (and prints the same). An error renders (offset inside the input).
//! After the first NUL byte, each NUL-separated piece is a pathTest subPath
//! (its first byte picks the condition), checked with `PathTests::new`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sartor_location::{Condition, Path, PathTest, PathTests};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut pieces = text.split('\0');
    let location = pieces.next().unwrap_or_default();
    let path = match Path::parse(location) {
        Ok(path) => path,
        Err(error) => {
            assert!(error.offset() <= location.len(), "offset past the end");
            let _ = error.to_string();
            return;
        }
    };
    let printed = path.to_string();
    let again = match Path::parse(&printed) {
        Ok(again) => again,
        Err(error) => panic!("{location:?} printed as {printed:?}, which does not parse: {error}"),
    };
    assert_eq!(again, path, "{location:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed, "printing is not canonical");
    let _ = (path.has_glob(), path.uses_exclusion(), path.len());
    for len in 0..=path.len() + 1 {
        if let Some(prefix) = path.prefix(len) {
            assert!(prefix.is_prefix_of(&path));
        }
    }
    let mut tests = Vec::new();
    for piece in pieces {
        let (condition, sub_path) = match piece.as_bytes().first() {
            Some(b) if b % 2 == 0 => (Condition::MustExist, piece.get(1..).unwrap_or_default()),
            Some(_) => (Condition::MustNotExist, piece.get(1..).unwrap_or_default()),
            None => continue,
        };
        if let Ok(sub_path) = Path::parse(sub_path) {
            tests.push(PathTest {
                sub_path,
                condition,
            });
        }
    }
    if let Ok(tests) = PathTests::new(&path, &tests) {
        for depth in 0..=path.len() {
            let _ = (
                tests.condition_at(depth),
                tests.exists_ok(depth),
                tests.missing_ok(depth),
            );
        }
    }
});
