//! Listing, one way for every list the controller makes: page by page
//! (`limit`/`continue`), each page parsed once as JSON without managed
//! fields, and a list whose continue token expired (410) started again
//! without handing on an object twice.

use std::collections::HashSet;
use std::ops::ControlFlow;

use futures::AsyncBufReadExt as _;
use kube::Client;
use kube::api::{ApiResource, DynamicObject, ListParams};
use sartor_audit::namespace_and_name;
use serde_json::Value;

use crate::api_errors::is_gone;

mod listed;

/// Objects asked for per list call.
pub const PAGE: u32 = 250;

/// One page of a list and the next page's token, or the API server's error.
type Page = Result<(Vec<Value>, Option<String>), kube::Error>;

/// Where [`list`] gets pages: the page after `token` (`None`: the
/// first).
pub(crate) trait Pages {
    fn page(&mut self, token: Option<String>) -> impl Future<Output = Page> + Send;
}

/// One kind's pages from the API server: in `namespace` when given, of
/// the objects `labels` select when given.
pub(crate) struct KindPages<'a> {
    pub(crate) client: &'a Client,
    pub(crate) resource: &'a ApiResource,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) labels: Option<&'a str>,
    /// Where each page's response is read.
    pub(crate) body: &'a mut Vec<u8>,
}

impl Pages for KindPages<'_> {
    fn page(&mut self, token: Option<String>) -> impl Future<Output = Page> + Send {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(labels) = self.labels {
            params = params.labels(labels);
        }
        if let Some(token) = token {
            params = params.continue_token(&token);
        }
        let (client, resource, namespace) = (self.client, self.resource, self.namespace);
        let body = &mut *self.body;
        async move { list_page(client, resource, namespace, &params, body).await }
    }
}

/// Restarts of one kind's list after an expired continue token, before the
/// scan gives up on it.
const RESTARTS: usize = 3;

/// Lists one kind, page by page through `page` (the continue token of the
/// page to fetch: `None` for the first), handing each page's objects to
/// `each`, each object once, until `each` says to stop (`Break`, handed
/// back). An expired continue token (410: a list held up
/// longer than the API server keeps its snapshot, say behind `--diff |
/// less`) lists the kind again from the start, leaving out the objects
/// already handed on (by namespace and name); after [`RESTARTS`] of them,
/// the 410 is the error.
pub(crate) async fn list(
    mut pages: impl Pages,
    mut each: impl FnMut(Vec<Value>) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, kube::Error> {
    let mut handed = HandedOn::default();
    let mut token: Option<String> = None;
    let mut restarts = 0;
    loop {
        match pages.page(token.take()).await {
            Ok((mut items, next)) => {
                if restarts > 0 {
                    items.retain(|object| !handed.before_restart(object));
                }
                for object in &items {
                    handed.add(object);
                }
                if each(items).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                match next {
                    Some(next) => token = Some(next),
                    None => return Ok(ControlFlow::Continue(())),
                }
            }
            Err(error) if is_gone(&error) && restarts < RESTARTS => {
                restarts += 1;
                handed.restart();
                tracing::info!(
                    restarts,
                    "the list's continue token expired; listing the kind again from the start"
                );
            }
            Err(error) => return Err(error),
        }
    }
}

/// The objects of one kind a list has handed on, by namespace and name:
/// one string of them all (a restart is rare, a kind's objects many, so no
/// allocation per object), looked up only after a restart.
#[derive(Debug, Default)]
struct HandedOn {
    /// Each object's namespace and name, one after another.
    names: String,
    /// Where each object's namespace ends and its name ends, in `names`.
    ends: Vec<(usize, usize)>,
    /// Those handed on before the last restart.
    before: HashSet<(String, String)>,
}

impl HandedOn {
    fn add(&mut self, object: &Value) {
        let (namespace, name) = namespace_and_name(object);
        self.names.push_str(namespace);
        let namespace_end = self.names.len();
        self.names.push_str(name);
        self.ends.push((namespace_end, self.names.len()));
    }

    /// The list starts again: what it handed on so far is what it has to
    /// leave out.
    fn restart(&mut self) {
        let mut start = 0;
        for &(namespace_end, end) in &self.ends {
            let namespace = self.names.get(start..namespace_end).unwrap_or_default();
            let name = self.names.get(namespace_end..end).unwrap_or_default();
            self.before
                .insert((namespace.to_string(), name.to_string()));
            start = end;
        }
    }

    fn before_restart(&self, object: &Value) -> bool {
        let (namespace, name) = namespace_and_name(object);
        self.before
            .contains(&(namespace.to_string(), name.to_string()))
    }
}

/// One page of a list, as JSON (parsed once, not through a typed object,
/// and without managed fields), each item with its `apiVersion` and `kind`,
/// and the next page's token. The response is read into `body`, whose room
/// the next page reuses: a page of Pods is megabytes, and growing a fresh
/// buffer for each (then copying it into a string) was a fifth of a scan's
/// CPU.
async fn list_page(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    params: &ListParams,
    body: &mut Vec<u8>,
) -> Result<(Vec<Value>, Option<String>), kube::Error> {
    let url = <DynamicObject as kube::Resource>::url_path(resource, namespace);
    let request = kube::core::Request::new(url)
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    body.clear();
    // Chunk by chunk: `read_to_end` would zero the buffer's spare room before
    // each read, megabytes for every few kilobytes read.
    let mut response = std::pin::pin!(client.request_stream(request).await?);
    loop {
        let chunk = response.fill_buf().await.map_err(kube::Error::ReadEvents)?;
        if chunk.is_empty() {
            break;
        }
        let read = chunk.len();
        body.extend_from_slice(chunk);
        response.as_mut().consume_unpin(read);
    }
    let page: listed::ListPage = serde_json::from_slice(body).map_err(kube::Error::SerdeError)?;
    Ok(page.into_objects(&resource.api_version, &resource.kind))
}

#[cfg(test)]
mod tests {
    use kube::core::Status;
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn an_expired_continue_token_lists_the_kind_again_without_repeats() {
        let object = |name: &str| json!({"metadata": {"namespace": "shop", "name": name}});
        let expired = || {
            kube::Error::Api(
                Status::failure("the provided continue parameter is too old", "Expired")
                    .with_code(410)
                    .boxed(),
            )
        };
        /// Pages answered by `answer` from the call's number and token.
        struct Scripted<F> {
            calls: usize,
            answer: F,
        }
        impl<F: FnMut(usize, Option<&str>) -> Page> Pages for Scripted<F> {
            fn page(&mut self, token: Option<String>) -> impl Future<Output = Page> + Send {
                self.calls += 1;
                let page = (self.answer)(self.calls, token.as_deref());
                async move { page }
            }
        }
        // a, b | 410 | a, b (again) | c
        let pages = Scripted {
            calls: 0,
            answer: |call: usize, token: Option<&str>| match (call, token) {
                (1, None) => Ok((vec![object("a"), object("b")], Some("t1".into()))),
                (2, Some("t1")) => Err(expired()),
                (3, None) => Ok((vec![object("a"), object("b")], Some("t2".into()))),
                (4, Some("t2")) => Ok((vec![object("c")], None)),
                (call, token) => panic!("call {call} with {token:?}"),
            },
        };
        let mut handed: Vec<Vec<Value>> = Vec::new();
        let listed = list(pages, |items| {
            handed.push(items);
            ControlFlow::Continue(())
        });
        assert_eq!(listed.await.unwrap(), ControlFlow::Continue(()));
        assert_eq!(
            handed,
            [vec![object("a"), object("b")], vec![], vec![object("c")]]
        );
        // A token that keeps expiring: the 410 after RESTARTS restarts.
        let mut calls = 0;
        let always = Scripted {
            calls: 0,
            answer: |_: usize, token: Option<&str>| {
                calls += 1;
                match token {
                    None => Ok((vec![object("a")], Some("t".into()))),
                    Some(_) => Err(expired()),
                }
            },
        };
        let error = list(always, |_| ControlFlow::Continue(()))
            .await
            .unwrap_err();
        assert!(is_gone(&error));
        assert_eq!(calls, 2 * (RESTARTS + 1));
        // Told to stop after the first page: no other page is asked for.
        let mut asked = 0;
        let endless = Scripted {
            calls: 0,
            answer: |call: usize, _: Option<&str>| {
                asked = call;
                Ok((vec![object("a")], Some("more".into())))
            },
        };
        let stopped = list(endless, |_| ControlFlow::Break(())).await;
        assert_eq!(stopped.unwrap(), ControlFlow::Break(()));
        assert_eq!(asked, 1);
    }
}
