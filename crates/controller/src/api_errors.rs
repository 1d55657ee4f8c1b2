//! The API server's refusals the controller acts on, by what they mean: the
//! one place that reads a `kube::Error`'s HTTP code, so that a handler says
//! "not found" or "conflict" rather than a number.

/// The code of the API server's answer, when the error is one.
fn code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// 404: no such object, or no such resource. For a path it does not serve
/// at all, a kube-apiserver answers `404 page not found` in plain text,
/// which kube turns into a `Status` with code 404 and reason `Failed to
/// parse error data`; kube 5's `Status::is_not_found` accepts only reason
/// `NotFound`, so the code is what tells.
pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    code(error) == Some(404)
}

/// 403: RBAC refused the request (or an admission plugin did).
pub(crate) fn is_forbidden(error: &kube::Error) -> bool {
    code(error) == Some(403)
}

/// 409: the object exists already, or changed since it was read.
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    code(error) == Some(409)
}

/// 410: a list's continue token (or a watch's resourceVersion) expired.
pub(crate) fn is_gone(error: &kube::Error) -> bool {
    code(error) == Some(410)
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn answered(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure("injected", reason).with_code(code).boxed())
    }

    type Check = fn(&kube::Error) -> bool;

    #[test]
    fn each_check_is_its_code_and_only_an_answer_has_one() {
        let checks: [(Check, u16); 4] = [
            (is_not_found, 404),
            (is_forbidden, 403),
            (is_conflict, 409),
            (is_gone, 410),
        ];
        for (check, code) in checks {
            assert!(check(&answered(code, "Whatever")), "{code}");
            assert!(!check(&answered(500, "InternalError")), "{code} vs 500");
        }
        // A plain-text 404 (a path not served) is not found too.
        assert!(is_not_found(&answered(404, "Failed to parse error data")));
        let not_an_answer = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert!(!is_not_found(&not_an_answer));
    }
}
