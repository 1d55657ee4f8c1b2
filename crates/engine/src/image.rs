//! Image references for the AssignImage mutator: split an image string into
//! domain / path / tag the way Gatekeeper does, check the parts a mutator
//! assigns, and put them in.
//!
//! Ported from Gatekeeper's `pkg/mutation/mutators/assignimage/imageparser.go`.
//! Parsing never fails and loses nothing: any string splits into three parts,
//! and joining them again gives the same string. Validation exists so that
//! mutators converge: an assigned part must not contain a separator (`/`, `:`,
//! `@`) that would make the result split differently the next time the mutator
//! runs.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

// Gatekeeper's patterns use Go's `\w` and `\d`, which are ASCII-only; Rust's
// are Unicode, so the classes are spelled out here to keep the same behaviour.

/// A domain: something with a dot in it, or `localhost`, either with an
/// optional port.
#[allow(clippy::expect_used)] // A constant pattern; the tests compile and exercise it.
static DOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(^[0-9A-Za-z_][0-9A-Za-z_-]*\.[0-9A-Za-z_.-]*[0-9A-Za-z_](:[0-9]+)?$)|(^localhost(:[0-9]+)?$)",
    )
    .expect("the domain pattern is valid")
});

/// A path: lower-case alphanumeric components joined by one `.`, `_` or `/`,
/// by `__`, or by any number of dashes. Gatekeeper leaves the end unanchored
/// and requires the leftmost-first match to be the whole path.
#[allow(clippy::expect_used)] // A constant pattern; the tests compile and exercise it.
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]+(?:(?:(?:[._/]|__|[-]*)[a-z0-9]+)+)?")
        .expect("the path pattern is valid")
});

/// A tag (`:` and up to 128 word characters, dots and dashes, not starting
/// with a dot or dash) or a digest (`@algorithm:` and at least 32 hex digits).
#[allow(clippy::expect_used)] // A constant pattern; the tests compile and exercise it.
static TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(^:[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}$)|(^@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,}$)",
    )
    .expect("the tag pattern is valid")
});

/// An image reference split the way Gatekeeper splits it: domain / path / tag-or-digest.
///
/// The domain is everything before the first `/` when that part contains a
/// `.` or `:` or is exactly `localhost`; otherwise there is no domain. The tag
/// is everything in the rest from the first `:` or `@` on, so a tag and a
/// digest (`name:tag@sha256:…`) form one tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image<'a> {
    /// The registry, such as `gcr.io` or `localhost:5000`; empty if none.
    /// Never contains `/`.
    pub domain: &'a str,
    /// The repository path, such as `library/nginx`. Never contains `:` or `@`.
    pub path: &'a str,
    /// The tag or digest with its leading `:` or `@`, such as `:1.25` or
    /// `@sha256:…`; empty if none.
    pub tag: &'a str,
}

impl<'a> Image<'a> {
    /// Splits `reference` into its parts. Never fails, like Gatekeeper's
    /// `newImage`: a malformed reference still splits somehow, and joining the
    /// parts again (with [`fmt::Display`]) gives `reference` back.
    #[must_use]
    pub fn parse(reference: &'a str) -> Image<'a> {
        let (domain, remainder) = split_domain(reference);
        let (path, tag) = split_tag(remainder);
        Image { domain, path, tag }
    }
}

impl Image<'_> {
    /// The parts joined again, as [`fmt::Display`] writes them, without the
    /// formatting machinery.
    fn join(&self) -> String {
        let slash = usize::from(!self.domain.is_empty());
        let mut joined =
            String::with_capacity(self.domain.len() + slash + self.path.len() + self.tag.len());
        if slash == 1 {
            joined.push_str(self.domain);
            joined.push('/');
        }
        joined.push_str(self.path);
        joined.push_str(self.tag);
        joined
    }
}

impl fmt::Display for Image<'_> {
    /// Joins the parts again: `domain/` if there is a domain, then path and tag.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.domain.is_empty() {
            write!(f, "{}/", self.domain)?;
        }
        write!(f, "{}{}", self.path, self.tag)
    }
}

/// Gatekeeper's `splitDomain`: the part before the first `/` is the domain if
/// it could be one.
fn split_domain(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((domain, remainder)) if looks_like_domain(domain) => (domain, remainder),
        _ => ("", name),
    }
}

// The separators are ASCII, and no byte of a multi-byte UTF-8 character is,
// so scanning bytes finds the same places as scanning characters, faster.

fn looks_like_domain(prefix: &str) -> bool {
    prefix.bytes().any(|b| b == b'.' || b == b':') || prefix == "localhost"
}

/// Gatekeeper's `splitTag`: the tag starts at the first `:` or `@`.
fn split_tag(remainder: &str) -> (&str, &str) {
    match remainder.bytes().position(|b| b == b':' || b == b'@') {
        Some(at) => remainder.split_at(at),
        None => (remainder, ""),
    }
}

/// The parts an AssignImage assigns; None/empty = keep the image's own part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageParts {
    /// `assignDomain`: the new domain, such as `myreg.io:5000`.
    pub domain: Option<String>,
    /// `assignPath`: the new path, such as `library/busybox`.
    pub path: Option<String>,
    /// `assignTag`: the new tag (`:latest`) or digest (`@sha256:…`); replaces
    /// the image's tag and digest together.
    pub tag: Option<String>,
}

impl ImageParts {
    /// Validates like Gatekeeper's validateImageParts (same rules, same order of checks).
    ///
    /// In order: at least one part is set; the domain is a domain with a dot or
    /// `localhost`, with an optional port; the path is a lower-case image path;
    /// the tag is a tag or digest; and when no domain is set, the path does not
    /// start with something that would be read as a domain.
    ///
    /// # Errors
    /// The first [`ImageError`] found.
    pub fn validate(&self) -> Result<(), ImageError> {
        let (domain, path, tag) = (set(&self.domain), set(&self.path), set(&self.tag));
        if domain.is_empty() && path.is_empty() && tag.is_empty() {
            return Err(ImageError::MissingComponents);
        }
        validate_domain(domain)?;
        if !path.is_empty() && PATH.find(path).map(|m| m.as_str()) != Some(path) {
            return Err(ImageError::InvalidPath(path.to_owned()));
        }
        validate_tag(tag)?;
        // Without a domain, a path like `gcr.io/repo` would be read back as
        // domain `gcr.io` and path `repo`, and grow on every run.
        if domain.is_empty() && !split_domain(path).0.is_empty() {
            return Err(ImageError::DomainLikePath(path.to_owned()));
        }
        Ok(())
    }

    /// Whether applying these (valid) parts to what they produced never
    /// changes it again: false only for the exception [`apply`](Self::apply)
    /// describes, a path without `/` assigned alone.
    pub fn idempotent(&self) -> bool {
        let path = set(&self.path);
        !set(&self.domain).is_empty()
            || !set(&self.tag).is_empty()
            || path.is_empty()
            || path.contains('/')
    }

    /// Gatekeeper's mutateImage: parse `current`, replace the parts that are set (non-empty), re-join.
    ///
    /// With parts that pass [`validate`](Self::validate), applying the result
    /// again changes nothing, with one exception inherited from Gatekeeper.
    /// When only a path without `/` is assigned, `current` has no domain and
    /// its tag contains a `/`, the new path and the tag up to that `/` become
    /// the first segment of the result; if that segment contains a `.` or `:`,
    /// the result reads as having a domain, and the next application changes
    /// it once more: path `p` on `a/b:c/d` gives `p:c/d`, then `p:c/p`; path
    /// `p.q` on `@x/y` gives `p.q@x/y`, then `p.q@x/p.q`. A third application
    /// changes nothing. Real image tags never contain `/`.
    #[must_use]
    pub fn apply(&self, current: &str) -> String {
        self.assigned(Image::parse(current)).join()
    }

    /// [`apply`](Self::apply) in place: whether `current` changed. Allocates
    /// only when it does: when every part comes out as it was, joining them
    /// gives `current` back (parsing loses nothing), so there is nothing to
    /// build. This is the case of a mutator re-applied to what it made.
    pub fn apply_in_place(&self, current: &mut String) -> bool {
        let old = Image::parse(current);
        let new = self.assigned(old.clone());
        if new == old {
            return false;
        }
        let image = new.join();
        if image == *current {
            return false;
        }
        *current = image;
        true
    }

    /// `old` with the parts that are set replaced.
    fn assigned<'a>(&'a self, old: Image<'a>) -> Image<'a> {
        Image {
            domain: set_or(&self.domain, old.domain),
            path: set_or(&self.path, old.path),
            tag: set_or(&self.tag, old.tag),
        }
    }
}

/// The assigned value, or `""` when unset.
fn set(part: &Option<String>) -> &str {
    part.as_deref().unwrap_or("")
}

/// Gatekeeper's `ignoreUnset`: the assigned value if it is non-empty, else the old one.
fn set_or<'a>(part: &'a Option<String>, old: &'a str) -> &'a str {
    match part.as_deref() {
        Some(new) if !new.is_empty() => new,
        _ => old,
    }
}

fn validate_domain(domain: &str) -> Result<(), ImageError> {
    if domain.is_empty() {
        return Ok(());
    }
    if !DOMAIN.is_match(domain) {
        return Err(ImageError::InvalidDomain(domain.to_owned()));
    }
    // Unreachable given the pattern; kept, as in Gatekeeper, so that the
    // pattern and the parser cannot drift apart: a valid domain must parse as one.
    if split_domain(&format!("{domain}/")) != (domain, "") {
        return Err(ImageError::InvalidDomain(domain.to_owned()));
    }
    Ok(())
}

fn validate_tag(tag: &str) -> Result<(), ImageError> {
    if tag.is_empty() {
        return Ok(());
    }
    if !TAG.is_match(tag) {
        return Err(ImageError::InvalidTag(tag.to_owned()));
    }
    // Unreachable given the pattern; kept for the same reason as for domains.
    if split_tag(tag) != ("", tag) {
        return Err(ImageError::InvalidTag(tag.to_owned()));
    }
    Ok(())
}

/// Why an AssignImage's parameters are invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// None of assignDomain, assignPath and assignTag is set.
    #[error("at least one of assignDomain, assignPath and assignTag must be set")]
    MissingComponents,
    /// assignDomain is not a domain name with a dot, or `localhost`, with an optional port.
    #[error("assignDomain {0:?} must be a fully-qualified domain name or localhost")]
    InvalidDomain(String),
    /// assignPath is not a lower-case image path.
    #[error(
        "assignPath {0:?} must be a valid image path: lower-case letters and digits, \
         separated by '/', '.', '_', '__' or dashes"
    )]
    InvalidPath(String),
    /// assignTag is neither a tag nor a digest.
    #[error("assignTag {0:?} must be a valid image tag (\":tag\") or digest (\"@algorithm:hex\")")]
    InvalidTag(String),
    /// assignDomain is unset and assignPath starts with something that reads as a domain.
    #[error(
        "assignDomain must be set if the first part of assignPath {0:?} can be interpreted \
         as part of a domain"
    )]
    DomainLikePath(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DIGEST: &str = "@sha256:12345678901234567890123456789012";

    fn parts(domain: &str, path: &str, tag: &str) -> ImageParts {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        ImageParts {
            domain: opt(domain),
            path: opt(path),
            tag: opt(tag),
        }
    }

    fn split(reference: &str) -> (&str, &str, &str) {
        let image = Image::parse(reference);
        (image.domain, image.path, image.tag)
    }

    #[test]
    fn parse_gatekeeper_cases() {
        // TestNewImage in imageparser_test.go.
        let cases = [
            (
                "gcr.io/some-image/hello:latest",
                ("gcr.io", "some-image/hello", ":latest"),
            ),
            ("", ("", "", "")),
            (
                "some-image/hello@sha256:abcde",
                ("", "some-image/hello", "@sha256:abcde"),
            ),
            (
                "some-image/hello:latest",
                ("", "some-image/hello", ":latest"),
            ),
            ("some-image/hello", ("", "some-image/hello", "")),
            ("some-image:tag123", ("", "some-image", ":tag123")),
            ("alpine", ("", "alpine", "")),
            ("_/alpine", ("", "_/alpine", "")),
            ("_/alpine:latest", ("", "_/alpine", ":latest")),
            ("library/busybox:v9", ("", "library/busybox", ":v9")),
            (
                "this.that.com/repo/alpine:1.23",
                ("this.that.com", "repo/alpine", ":1.23"),
            ),
            (
                "this.that.com:5000/repo/alpine:latest",
                ("this.that.com:5000", "repo/alpine", ":latest"),
            ),
            (
                "localhost:5000/repo/alpine:latest",
                ("localhost:5000", "repo/alpine", ":latest"),
            ),
            (
                "x.y.z/gcr.io/repo:latest",
                ("x.y.z", "gcr.io/repo", ":latest"),
            ),
            ("gcr.io/repo:latest", ("gcr.io", "repo", ":latest")),
            (
                "x.io/get/ready4.//this/not.good:404@yikes/bad/string",
                (
                    "x.io",
                    "get/ready4.//this/not.good",
                    ":404@yikes/bad/string",
                ),
            ),
        ];
        for (reference, want) in cases {
            assert_eq!(split(reference), want, "{reference:?}");
        }
    }

    #[test]
    fn parse_more_cases() {
        let digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let nginx_digest = format!("nginx{digest}");
        let registry_digest = format!("my.registry:8080/x{digest}");
        let tag_and_digest = format!("gcr.io/a:b{digest}");
        let tag_and_digest_tag = format!(":b{digest}");
        let cases = [
            (
                "docker.io/library/nginx:1.25",
                ("docker.io", "library/nginx", ":1.25"),
            ),
            ("nginx", ("", "nginx", "")),
            ("nginx:1.25", ("", "nginx", ":1.25")),
            (&nginx_digest, ("", "nginx", digest)),
            ("localhost/foo", ("localhost", "foo", "")),
            ("localhost:5000/foo", ("localhost:5000", "foo", "")),
            ("localhost:5000/a/b:c", ("localhost:5000", "a/b", ":c")),
            (&registry_digest, ("my.registry:8080", "x", digest)),
            ("a/b/c", ("", "a/b/c", "")),
            // A tag and a digest together are one tag.
            (&tag_and_digest, ("gcr.io", "a", &tag_and_digest_tag)),
            ("", ("", "", "")),
            (":tag", ("", "", ":tag")),
            ("@sha256:abc", ("", "", "@sha256:abc")),
            ("/x", ("", "/x", "")),
            ("//x", ("", "//x", "")),
            ("x/", ("", "x/", "")),
            ("a.b/", ("a.b", "", "")),
            ("a.b/:t", ("a.b", "", ":t")),
            (".//x", (".", "/x", "")),
            (":/x", (":", "x", "")),
            // A single-label name with a port is a domain too.
            ("registry:5000/foo", ("registry:5000", "foo", "")),
            ("nginx:1.25/x", ("nginx:1.25", "x", "")),
            // Case matters for `localhost`, not for the dot rule.
            (
                "Docker.IO/Library/NGINX:Latest",
                ("Docker.IO", "Library/NGINX", ":Latest"),
            ),
            ("LOCALHOST/foo", ("", "LOCALHOST/foo", "")),
            ("localhostx/foo", ("", "localhostx/foo", "")),
            ("xlocalhost/foo", ("", "xlocalhost/foo", "")),
            ("localhost", ("", "localhost", "")),
            // `@` does not make a domain, `.` after it does.
            ("a@b/c.d/e", ("", "a", "@b/c.d/e")),
            ("a@b.c/d", ("a@b.c", "d", "")),
            ("a/b:c/d", ("", "a/b", ":c/d")),
            ("ünï.côde/päth:tág", ("ünï.côde", "päth", ":tág")),
            ("a b/c d:e f", ("", "a b/c d", ":e f")),
        ];
        for (reference, want) in cases {
            assert_eq!(split(reference), want, "{reference:?}");
            assert_eq!(Image::parse(reference).to_string(), reference);
        }
    }

    #[test]
    fn display_joins_parts() {
        let image = Image {
            domain: "gcr.io",
            path: "a/b",
            tag: ":c",
        };
        assert_eq!(image.to_string(), "gcr.io/a/b:c");
        let image = Image {
            domain: "",
            path: "a",
            tag: "",
        };
        assert_eq!(image.to_string(), "a");
        let image = Image {
            domain: "d.io",
            path: "",
            tag: "",
        };
        assert_eq!(image.to_string(), "d.io/");
    }

    #[test]
    fn apply_gatekeeper_cases() {
        // TestMutate in assignimage_mutator_test.go (a missing image is "").
        let cases = [
            (
                parts("", "", ":new"),
                "library/busybox:v1",
                "library/busybox:new",
            ),
            (
                parts("", "library/busybox", ":new"),
                "",
                "library/busybox:new",
            ),
            (
                parts("", "new/repo", ""),
                "library/busybox:v1",
                "new/repo:v1",
            ),
            (
                parts("myreg.io", "", ""),
                "docker.io/library/busybox:v1",
                "myreg.io/library/busybox:v1",
            ),
            (
                parts("myreg.io", "", ""),
                "library/busybox:v1",
                "myreg.io/library/busybox:v1",
            ),
            (
                parts("", "", ":latest"),
                "myreg.io/library/busybox",
                "myreg.io/library/busybox:latest",
            ),
            (
                parts("", "", DIGEST),
                "myreg.io/library/busybox",
                "myreg.io/library/busybox@sha256:12345678901234567890123456789012",
            ),
            (
                parts("myreg.io", "newlib/newbox", ":v2"),
                "docker.io/library/busybox:v1",
                "myreg.io/newlib/newbox:v2",
            ),
            (
                parts("", "newlib/newbox", ""),
                "library/busybox:v1",
                "newlib/newbox:v1",
            ),
            (
                parts("", "newlib/newbox", ":latest"),
                "library/busybox:v1",
                "newlib/newbox:latest",
            ),
            (
                parts("", "", DIGEST),
                "library/busybox:v1",
                "library/busybox@sha256:12345678901234567890123456789012",
            ),
            (
                parts("myreg.io", "", ""),
                "this/not.good:ABC123_//lib.com.repo//localhost@blah101",
                "myreg.io/this/not.good:ABC123_//lib.com.repo//localhost@blah101",
            ),
            (
                parts("myreg.io", "", ""),
                "a.b.c:5000//not.good:ABC123_//lib.com.repo//localhost@blah101",
                "myreg.io//not.good:ABC123_//lib.com.repo//localhost@blah101",
            ),
            (
                parts("", "repo/app", ":latest"),
                "a.b.c:/not.good:ABC123_//lib.com.repo//localhost@blah101",
                "a.b.c:/repo/app:latest",
            ),
            (
                parts("myreg.io", "my.special.repo/a.b/c", ""),
                "a.b:latest",
                "myreg.io/my.special.repo/a.b/c:latest",
            ),
        ];
        for (parts, current, want) in cases {
            assert_eq!(parts.validate(), Ok(()), "{parts:?}");
            let once = parts.apply(current);
            assert_eq!(once, want, "{parts:?} on {current:?}");
            // Gatekeeper's tests are named "still converges".
            assert_eq!(parts.apply(&once), once, "{parts:?} on {once:?}");
        }
    }

    #[test]
    fn apply_every_combination() {
        let current = "docker.io/library/nginx:1.25@sha256:abc";
        let cases = [
            (parts("", "", ""), "docker.io/library/nginx:1.25@sha256:abc"),
            (parts("d.io", "", ""), "d.io/library/nginx:1.25@sha256:abc"),
            (parts("", "p/q", ""), "docker.io/p/q:1.25@sha256:abc"),
            (parts("", "", ":t"), "docker.io/library/nginx:t"),
            (parts("d.io", "p/q", ""), "d.io/p/q:1.25@sha256:abc"),
            (parts("d.io", "", ":t"), "d.io/library/nginx:t"),
            (parts("", "p/q", ":t"), "docker.io/p/q:t"),
            (parts("d.io", "p/q", ":t"), "d.io/p/q:t"),
        ];
        for (parts, want) in cases {
            assert_eq!(parts.apply(current), want, "{parts:?}");
        }

        let current = "nginx";
        let cases = [
            (parts("", "", ""), "nginx"),
            (parts("d.io", "", ""), "d.io/nginx"),
            (parts("", "p/q", ""), "p/q"),
            (parts("", "", ":t"), "nginx:t"),
            (parts("d.io", "p/q", ""), "d.io/p/q"),
            (parts("d.io", "", ":t"), "d.io/nginx:t"),
            (parts("", "p/q", ":t"), "p/q:t"),
            (parts("d.io", "p/q", ":t"), "d.io/p/q:t"),
        ];
        for (parts, want) in cases {
            assert_eq!(parts.apply(current), want, "{parts:?}");
        }

        let current = "";
        let cases = [
            (parts("", "", ""), ""),
            (parts("d.io", "", ""), "d.io/"),
            (parts("", "p/q", ""), "p/q"),
            (parts("", "", ":t"), ":t"),
            (parts("d.io", "p/q", ""), "d.io/p/q"),
            (parts("d.io", "", ":t"), "d.io/:t"),
            (parts("", "p/q", ":t"), "p/q:t"),
            (parts("d.io", "p/q", ":t"), "d.io/p/q:t"),
        ];
        for (parts, want) in cases {
            assert_eq!(parts.apply(current), want, "{parts:?}");
        }
    }

    #[test]
    fn apply_more_cases() {
        let cases = [
            (
                parts("localhost:5000", "", ""),
                "nginx:1.25",
                "localhost:5000/nginx:1.25",
            ),
            (parts("d.io", "", ""), "localhost/foo", "d.io/foo"),
            (
                parts("", "", DIGEST),
                "nginx:1.25",
                &format!("nginx{DIGEST}"),
            ),
            (parts("", "", ":v2"), &format!("nginx{DIGEST}"), "nginx:v2"),
            (parts("", "x", ""), ":tag", "x:tag"),
            (parts("", "x", ""), "a.b/", "a.b/x"),
            (parts("", "", ":t"), "a.b/", "a.b/:t"),
            (parts("", "", ":t"), "/x", "/x:t"),
            // Some("") is unset, like Gatekeeper's empty string.
            (
                ImageParts {
                    domain: Some(String::new()),
                    path: Some("p".to_owned()),
                    tag: Some(String::new()),
                },
                "d.io/a:b",
                "d.io/p:b",
            ),
            // Not validated: apply does what it is told.
            (parts("", "a.b/c", ""), "x", "a.b/c"),
        ];
        for (parts, current, want) in cases {
            assert_eq!(parts.apply(current), want, "{parts:?} on {current:?}");
        }
    }

    #[test]
    fn apply_twice_can_differ_once() {
        // Inherited from Gatekeeper: see `ImageParts::apply`.
        let plain = parts("", "p", "");
        assert_eq!(plain.validate(), Ok(()));
        let once = plain.apply("a/b:c/d");
        assert_eq!(once, "p:c/d");
        let twice = plain.apply(&once);
        assert_eq!(twice, "p:c/p");
        assert_eq!(plain.apply(&twice), twice);
        assert_eq!(
            parts_apply_then(&plain, "x/y@a.b/c"),
            ["p@a.b/c", "p@a.b/p", "p@a.b/p"]
        );
        // `@` with no `.` or `:` before the `/` is not read as a domain...
        assert_eq!(
            parts_apply_then(&plain, "x/y@ab/c"),
            ["p@ab/c", "p@ab/c", "p@ab/c"]
        );
        // ...unless the assigned path brings the `.`.
        let dotted = parts("", "p.q", "");
        assert_eq!(dotted.validate(), Ok(()));
        assert_eq!(
            parts_apply_then(&dotted, "@x/y"),
            ["p.q@x/y", "p.q@x/p.q", "p.q@x/p.q"]
        );
    }

    fn parts_apply_then(parts: &ImageParts, current: &str) -> [String; 3] {
        let once = parts.apply(current);
        let twice = parts.apply(&once);
        let thrice = parts.apply(&twice);
        [once, twice, thrice]
    }

    fn error(domain: &str, path: &str, tag: &str) -> Option<String> {
        parts(domain, path, tag)
            .validate()
            .err()
            .map(|e| e.to_string())
    }

    fn domain_error(domain: &str) -> Option<String> {
        Some(format!(
            "assignDomain {domain:?} must be a fully-qualified domain name or localhost"
        ))
    }

    fn path_error(path: &str) -> Option<String> {
        Some(format!(
            "assignPath {path:?} must be a valid image path: lower-case letters and digits, \
             separated by '/', '.', '_', '__' or dashes"
        ))
    }

    fn tag_error(tag: &str) -> Option<String> {
        Some(format!(
            "assignTag {tag:?} must be a valid image tag (\":tag\") or digest (\"@algorithm:hex\")"
        ))
    }

    #[test]
    fn messages() {
        assert_eq!(
            ImageError::MissingComponents.to_string(),
            "at least one of assignDomain, assignPath and assignTag must be set"
        );
        assert_eq!(
            ImageError::InvalidDomain("x".to_owned()).to_string(),
            r#"assignDomain "x" must be a fully-qualified domain name or localhost"#
        );
        assert_eq!(
            ImageError::InvalidPath("A".to_owned()).to_string(),
            r#"assignPath "A" must be a valid image path: lower-case letters and digits, separated by '/', '.', '_', '__' or dashes"#
        );
        assert_eq!(
            ImageError::InvalidTag(":a b".to_owned()).to_string(),
            r#"assignTag ":a b" must be a valid image tag (":tag") or digest ("@algorithm:hex")"#
        );
        assert_eq!(
            ImageError::DomainLikePath("a.b.c/repo".to_owned()).to_string(),
            r#"assignDomain must be set if the first part of assignPath "a.b.c/repo" can be interpreted as part of a domain"#
        );
        // Values are quoted with escapes.
        assert_eq!(
            ImageError::InvalidTag("a\"\n".to_owned()).to_string(),
            r#"assignTag "a\"\n" must be a valid image tag (":tag") or digest ("@algorithm:hex")"#
        );
    }

    #[test]
    fn validate_gatekeeper_cases() {
        // TestValidateImageParts in imageparser_test.go, with exact messages.
        let hash = "12345678901234567890123456789012";
        let double_digest = format!("@sha256:{hash}@sha256:{hash}");
        let cases: Vec<(&str, &str, &str, Option<String>)> = vec![
            ("my.register.io:5000", "lib/stuff/app", ":latest", None),
            ("", "", "", Some(ImageError::MissingComponents.to_string())),
            ("localhost:5000", "", "", None),
            ("localhost", "", "", None),
            ("a.b.c", "", "", None),
            ("a-b-c.com:5000", "", "", None),
            ("a.b.c:123", "", "", None),
            ("foobar", "", "", domain_error("foobar")),
            (".foobar", "", "", domain_error(".foobar")),
            ("foobar.", "", "", domain_error("foobar.")),
            ("foobar.:5000", "", "", domain_error("foobar.:5000")),
            ("foobar/:5000", "", "", domain_error("foobar/:5000")),
            (".foobar.", "", "", domain_error(".foobar.")),
            ("a_b_c:123", "", "", domain_error("a_b_c:123")),
            ("/not.ok.io:2000", "", "", domain_error("/not.ok.io:2000")),
            ("not.ok.io:2000/", "", "", domain_error("not.ok.io:2000/")),
            ("not/ok/io", "", "", domain_error("not/ok/io")),
            (
                "my.reg.io:abc2000",
                "",
                "",
                domain_error("my.reg.io:abc2000"),
            ),
            ("my.reg.io:2000:", "", "", domain_error("my.reg.io:2000:")),
            ("my.reg.io::2000", "", "", domain_error("my.reg.io::2000")),
            ("my.reg.io:latest", "", "", domain_error("my.reg.io:latest")),
            (
                "my.reg.io@sha256:abcde123456789",
                "",
                "",
                domain_error("my.reg.io@sha256:abcde123456789"),
            ),
            (";!234.com", "", "", domain_error(";!234.com")),
            ("", "lib/stuff", "", None),
            ("my.reg.io:5000", "a.b.c/stuff", "", None),
            (
                "",
                "a.b.c/stuff",
                ":latest",
                Some(ImageError::DomainLikePath("a.b.c/stuff".to_owned()).to_string()),
            ),
            ("", "lib/stuff-app__thing/a/b--c/e", "", None),
            ("", "lib/stuff/app/", "", path_error("lib/stuff/app/")),
            ("", "/lib/stuff/app", "", path_error("/lib/stuff/app")),
            (
                "my.register.io:5000",
                ":lib/stuff/app",
                "",
                path_error(":lib/stuff/app"),
            ),
            (
                "my.register.io:5000",
                "@lib/stuff/app",
                "",
                path_error("@lib/stuff/app"),
            ),
            (
                "my.register.io:5000",
                "lib/stuff/app:",
                "",
                path_error("lib/stuff/app:"),
            ),
            (
                "my.register.io:5000",
                "lib/stuff/app@",
                "",
                path_error("lib/stuff/app@"),
            ),
            (
                "my.register.io:5000",
                "lib/stuff:things/app",
                "",
                path_error("lib/stuff:things/app"),
            ),
            ("", "", ":latest", None),
            ("", "", DIGEST, None),
            ("", "", "latest", tag_error("latest")),
            ("", "", "sha256:12345678901234567890123456789012", {
                tag_error("sha256:12345678901234567890123456789012")
            }),
            ("", "", "@sha256:123456", tag_error("@sha256:123456")),
            (
                "",
                "",
                "@sha256:1XYZ5678901234567890123456789012",
                tag_error("@sha256:1XYZ5678901234567890123456789012"),
            ),
            ("", "", "/:latest", tag_error("/:latest")),
            ("", "", ":latest/", tag_error(":latest/")),
            ("", "", ":latest:", tag_error(":latest:")),
            ("", "", ":latest@", tag_error(":latest@")),
            ("", "", ":lat:est", tag_error(":lat:est")),
            ("", "", &double_digest, tag_error(&double_digest)),
            ("", "", "::latest", tag_error("::latest")),
            (
                "",
                "",
                "@@sha256:1XYZ5678901234567890123456789012",
                tag_error("@@sha256:1XYZ5678901234567890123456789012"),
            ),
            ("", "", "@:latest", tag_error("@:latest")),
        ];
        for (domain, path, tag, want) in cases {
            assert_eq!(
                error(domain, path, tag),
                want,
                "{domain:?} {path:?} {tag:?}"
            );
        }
    }

    #[test]
    fn validate_mutator_cases() {
        // TestMutatorForAssignImage: the parameter checks.
        assert_eq!(parts("a.b.c", "new/app", ":latest").validate(), Ok(()));
        assert_eq!(
            parts("", "a.b.c/repo", ":latest").validate(),
            Err(ImageError::DomainLikePath("a.b.c/repo".to_owned()))
        );
    }

    #[test]
    fn validate_more_cases() {
        let long_tag = format!(":{}", "a".repeat(128));
        let too_long_tag = format!(":{}", "a".repeat(129));
        let cases: Vec<(&str, &str, &str, Option<String>)> = vec![
            // Domains.
            ("A.B", "", "", None),
            ("1.2.3.4:5000", "", "", None),
            ("a_b.c", "", "", None),
            ("a-.b", "", "", None),
            ("a.-b", "", "", None),
            ("a..b", "", "", None),
            ("a.b", "", "", None),
            ("a.b:0", "", "", None),
            ("a.", "", "", domain_error("a.")),
            ("-a.b", "", "", domain_error("-a.b")),
            ("a.b-", "", "", domain_error("a.b-")),
            ("registry:5000", "", "", domain_error("registry:5000")),
            ("LOCALHOST", "", "", domain_error("LOCALHOST")),
            ("localhost:", "", "", domain_error("localhost:")),
            ("localhost.", "", "", domain_error("localhost.")),
            ("[::1]:5000", "", "", domain_error("[::1]:5000")),
            ("a.b\n", "", "", domain_error("a.b\n")),
            ("\na.b", "", "", domain_error("\na.b")),
            ("a b.c", "", "", domain_error("a b.c")),
            // Go's \w and \d are ASCII only.
            ("ü.io", "", "", domain_error("ü.io")),
            ("a.b:٣", "", "", domain_error("a.b:٣")),
            // Paths.
            ("", "a", "", None),
            ("", "a.b", "", None),
            ("", "localhost", "", None),
            ("", "a__b", "", None),
            ("", "a---b", "", None),
            ("", "a-b_c/d.e", "", None),
            ("", "A", "", path_error("A")),
            ("", "lib/Busybox", "", path_error("lib/Busybox")),
            ("", "a___b", "", path_error("a___b")),
            ("", "a..b", "", path_error("a..b")),
            ("", "a//b", "", path_error("a//b")),
            ("", "a.-b", "", path_error("a.-b")),
            ("", "-a", "", path_error("-a")),
            ("", "a-", "", path_error("a-")),
            ("", "ab\n", "", path_error("ab\n")),
            ("", "ü", "", path_error("ü")),
            ("", "a b", "", path_error("a b")),
            // Tags and digests.
            ("", "", ":a", None),
            ("", "", ":_", None),
            ("", "", ":A.b-C_9", None),
            ("", "", &long_tag, None),
            ("", "", &too_long_tag, tag_error(&too_long_tag)),
            ("", "", ":.a", tag_error(":.a")),
            ("", "", ":-a", tag_error(":-a")),
            ("", "", ":", tag_error(":")),
            ("", "", "@", tag_error("@")),
            ("", "", ":a b", tag_error(":a b")),
            ("", "", ":ü", tag_error(":ü")),
            ("", "", ":a\n", tag_error(":a\n")),
            (
                "",
                "",
                "@sha256+b.c_d-e:ABCDEFabcdef01234567890123456789",
                None,
            ),
            (
                "",
                "",
                "@sha256:0123456789abcdef0123456789abcdef0123456789",
                None,
            ),
            ("", "", "@sha256:1234567890123456789012345678901", {
                tag_error("@sha256:1234567890123456789012345678901")
            }),
            ("", "", "@1sha:12345678901234567890123456789012", {
                tag_error("@1sha:12345678901234567890123456789012")
            }),
            ("", "", "@sha-:12345678901234567890123456789012", {
                tag_error("@sha-:12345678901234567890123456789012")
            }),
            ("", "", ":v1@sha256:12345678901234567890123456789012", {
                tag_error(":v1@sha256:12345678901234567890123456789012")
            }),
            // Domain-like paths are only an error without a domain.
            (
                "",
                "localhost/x",
                "",
                Some(ImageError::DomainLikePath("localhost/x".to_owned()).to_string()),
            ),
            ("localhost", "localhost/x", "", None),
            // Order of checks: missing, domain, path, tag, domain-like path.
            ("foobar", "A", ":", domain_error("foobar")),
            ("", "A", ":", path_error("A")),
            ("a.b", "a", ":", tag_error(":")),
            ("", "a.b/c", ":", tag_error(":")),
        ];
        for (domain, path, tag, want) in cases {
            assert_eq!(
                error(domain, path, tag),
                want,
                "{domain:?} {path:?} {tag:?}"
            );
        }
    }

    #[test]
    fn validate_treats_empty_as_unset() {
        let empty = ImageParts {
            domain: Some(String::new()),
            path: Some(String::new()),
            tag: Some(String::new()),
        };
        assert_eq!(empty.validate(), Err(ImageError::MissingComponents));
        assert_eq!(
            ImageParts::default().validate(),
            Err(ImageError::MissingComponents)
        );
    }

    /// The one case where applying valid parts twice differs from applying
    /// them once (see `ImageParts::apply`).
    fn changes_on_second_apply(parts: &ImageParts, current: &str) -> bool {
        let image = Image::parse(current);
        let path = set(&parts.path);
        set(&parts.domain).is_empty()
            && set(&parts.tag).is_empty()
            && !path.is_empty()
            && !path.contains('/')
            && image.domain.is_empty()
            && image
                .tag
                .split_once('/')
                .is_some_and(|(head, _)| path.contains('.') || head.contains(['.', ':']))
    }

    /// Every string up to `len` characters over `alphabet`.
    fn all_strings(alphabet: &[char], len: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..len {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn convergence_exhaustive() {
        let domains = ["", "a.b", "localhost", "a.b:1", "a"];
        let paths = [
            "",
            "p",
            "p/q",
            "p.q",
            "localhost",
            "a.b/c",
            "localhost/x",
            "P",
        ];
        let tags = ["", ":t", DIGEST, "t"];
        let currents = all_strings(&['a', '.', ':', '/', '@'], 5);
        let mut valid = 0;
        for domain in domains {
            for path in paths {
                for tag in tags {
                    let parts = parts(domain, path, tag);
                    if parts.validate().is_err() {
                        continue;
                    }
                    valid += 1;
                    for current in &currents {
                        let once = parts.apply(current);
                        let twice = parts.apply(&once);
                        assert_eq!(
                            twice != once,
                            changes_on_second_apply(&parts, current),
                            "{parts:?} on {current:?}: {once:?} then {twice:?}"
                        );
                        assert_eq!(parts.apply(&twice), twice, "{parts:?} on {current:?}");
                        if parts.idempotent() {
                            assert_eq!(twice, once, "{parts:?} on {current:?}");
                        }
                    }
                }
            }
        }
        assert!(valid > 40, "{valid}");
    }

    #[test]
    fn round_trip_exhaustive() {
        for s in all_strings(&['a', '.', ':', '/', '@', 'l'], 5) {
            let image = Image::parse(&s);
            assert_eq!(image.to_string(), s);
            assert!(!image.domain.contains('/'));
            assert!(!image.path.contains([':', '@']));
            assert!(image.tag.is_empty() || image.tag.starts_with([':', '@']));
        }
    }

    fn component(valid: &'static str) -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some(String::new())),
            valid.prop_map(Some),
            "[a-cA.:/@_-]{1,6}".prop_map(Some),
        ]
    }

    fn any_parts() -> impl Strategy<Value = ImageParts> {
        let domain =
            component("([a-c_-]{1,3}\\.[a-c.-]{0,3}[a-c](:[0-9]{1,3})?|localhost(:[0-9])?)");
        let path = component("[a-c0-9]{1,2}([._/-]{1,2}[a-c0-9]{1,2}){0,3}");
        let tag = prop_oneof![
            component(":[a-c0-9_][a-c0-9_.-]{0,4}"),
            "@sha256:[0-9a-f]{32}".prop_map(Some),
        ];
        (domain, path, tag).prop_map(|(domain, path, tag)| ImageParts { domain, path, tag })
    }

    fn any_current() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-cA.:/@_-]{0,12}",
            "([a-c.:@]{1,4}/)?[a-c/.]{0,6}([:@][a-c.:/@]{0,6})?",
            ".{0,8}",
        ]
    }

    proptest! {
        #[test]
        fn valid_parts_converge(parts in any_parts(), current in any_current()) {
            if parts.validate().is_ok() {
                let once = parts.apply(&current);
                let twice = parts.apply(&once);
                if changes_on_second_apply(&parts, &current) {
                    prop_assert!(!parts.idempotent());
                    prop_assert_ne!(&twice, &once);
                } else {
                    prop_assert_eq!(&twice, &once);
                }
                prop_assert_eq!(parts.apply(&twice), twice);
            }
        }

        #[test]
        fn parse_round_trips(s in any_current()) {
            let image = Image::parse(&s);
            prop_assert_eq!(image.to_string(), s.as_str());
            prop_assert!(!image.domain.contains('/'));
            prop_assert!(!image.path.contains([':', '@']));
            prop_assert!(image.tag.is_empty() || image.tag.starts_with([':', '@']));
        }

        #[test]
        fn apply_sets_what_is_assigned(parts in any_parts(), current in any_current()) {
            if parts.validate().is_ok() {
                let result = parts.apply(&current);
                let image = Image::parse(&result);
                // Valid assigned parts read back as themselves.
                if let Some(domain) = parts.domain.as_deref().filter(|d| !d.is_empty()) {
                    prop_assert_eq!(image.domain, domain);
                }
                if let Some(tag) = parts.tag.as_deref().filter(|t| !t.is_empty()) {
                    prop_assert_eq!(image.tag, tag);
                }
                if let Some(path) = parts.path.as_deref().filter(|p| !p.is_empty())
                    && !changes_on_second_apply(&parts, &current)
                {
                    prop_assert_eq!(image.path, path);
                }
            }
        }

        #[test]
        fn apply_in_place_is_apply(parts in any_parts(), current in any_current()) {
            let want = parts.apply(&current);
            let mut image = current.clone();
            let changed = parts.apply_in_place(&mut image);
            prop_assert_eq!(&image, &want);
            prop_assert_eq!(changed, want != current);
            // Re-applied to its own result: mostly the unchanged case.
            let twice = parts.apply(&want);
            let changed = parts.apply_in_place(&mut image);
            prop_assert_eq!(&image, &twice);
            prop_assert_eq!(changed, twice != want);
        }
    }
}
