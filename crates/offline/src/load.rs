//! Reading mutators into a System, collecting every problem as a finding.

use std::collections::{HashMap, HashSet};
use std::fmt;

use sartor_api::{
    Document, Input, LoadError, Loaded, LoadedProvider, LoadedTemplate, MutatorObject, Origin,
    Problem, api_group, is_expansion_template_document, is_mutator_document, is_provider_document,
    json_type, mutators_from_documents, parse_mutator, read_documents_with_stdin,
    template_from_document, visit_documents,
};
use sartor_engine::analysis::gatekeeper::{self, Class};
use sartor_engine::analysis::{self, Rule, Severity};
use sartor_engine::{
    ApiResource, Expander, FileError, Gvk, MutatorId, Scopes, System, Template, TemplatesError,
};
use serde_json::{Value, json};

/// One problem with the mutator set, for humans (Display) and CI (JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What kind of problem.
    pub category: Category,
    /// Where the mutator (or unreadable input) is.
    pub origin: Origin,
    /// `Kind name` of the document, when known.
    pub subject: Option<String>,
    /// What is wrong.
    pub message: String,
    /// For an analysis finding: the other mutators involved, the place of
    /// the object and an object on which it plays out.
    pub analysis: Option<Box<analysis::Finding>>,
}

/// The name of [`Category::Gatekeeper`], whatever its class.
pub const GATEKEEPER: &str = "gatekeeper";

/// What kind of problem a [`Finding`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// An input that cannot be read, or a document that is not a mutator.
    Load,
    /// A mutator that does not compile.
    Compile,
    /// A schema conflict between mutators.
    Conflict,
    /// An externalData mutator asking a Provider the repository does not
    /// define, while it defines others.
    Provider,
    /// Where Gatekeeper v3.23.1 would treat a mutator of its apiVersion
    /// otherwise (see [`gatekeeper`]), by class.
    Gatekeeper(Class),
    /// A finding of the static analysis of the set.
    Analysis(Rule),
    /// An analysis error (`never-applies`) about a mutator with a
    /// Gatekeeper apiVersion, which Gatekeeper installs as it is: a warning,
    /// so that a repository Gatekeeper accepts still passes `sartor lint`.
    AcceptedByGatekeeper(Rule),
    /// A mutator `sartor export map` leaves out (`sartor lint
    /// --export-map`).
    Export,
}

impl Category {
    /// `load`, `compile`, `conflict`, `provider`, `gatekeeper`, or the
    /// analysis rule (`shadowed`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Load => "load",
            Category::Compile => "compile",
            Category::Conflict => "conflict",
            Category::Provider => "provider",
            Category::Export => "export",
            Category::Gatekeeper(_) => GATEKEEPER,
            Category::Analysis(rule) | Category::AcceptedByGatekeeper(rule) => rule.as_str(),
        }
    }

    /// Load, compile and conflict problems are errors; a provider not
    /// among those read is a warning (it may exist in the cluster); analysis
    /// findings have their rule's severity, Gatekeeper differences their
    /// class's (a warning, or a note beside the error sartor reports).
    pub fn severity(self) -> Severity {
        match self {
            Category::Load | Category::Compile | Category::Conflict => Severity::Error,
            Category::Provider | Category::Export => Severity::Warning,
            Category::Gatekeeper(class) => class.severity(),
            Category::Analysis(rule) => rule.severity(),
            Category::AcceptedByGatekeeper(_) => Severity::Warning,
        }
    }
}

impl fmt::Display for Finding {
    /// `file: document N: Kind name: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(subject) = &self.subject {
            write!(f, ": {subject}")?;
        }
        match self.category {
            Category::Analysis(rule) | Category::AcceptedByGatekeeper(rule) => {
                write!(f, ": {rule}")?;
            }
            Category::Gatekeeper(class) => write!(f, ": {class}")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl Finding {
    /// How much it matters.
    pub fn severity(&self) -> Severity {
        self.category.severity()
    }

    /// The machine-readable form: `{category, severity, file, document,
    /// item, subject, message}`, for analysis findings `mutators`, `path`
    /// and `example`, and for Gatekeeper differences `class`.
    pub fn to_json(&self) -> Value {
        let mut value = json!({
            "category": self.category.as_str(),
            "severity": self.severity().as_str(),
            "file": self.origin.file,
            "document": self.origin.document,
            "item": self.origin.item,
            "subject": self.subject,
            "message": self.message,
        });
        if let (Category::Gatekeeper(class), Value::Object(fields)) = (self.category, &mut value) {
            fields.insert("class".to_string(), json!(class.as_str()));
        }
        if let (Some(found), Value::Object(fields)) = (&self.analysis, &mut value) {
            let mutators: Vec<String> = found.mutators.iter().map(ToString::to_string).collect();
            fields.insert("mutators".to_string(), json!(mutators));
            fields.insert(
                "path".to_string(),
                json!(found.path.as_ref().map(ToString::to_string)),
            );
            fields.insert("example".to_string(), json!(found.example));
        }
        value
    }
}

/// The static analysis of the repository's mutators as findings, each
/// placed at the origin of the mutator it is about; `scopes` says which
/// kinds are namespaced. An error about a mutator with a Gatekeeper
/// apiVersion is a warning ([`Category::AcceptedByGatekeeper`]).
pub fn analysis_findings(repository: &Repository, scopes: &Scopes) -> Vec<Finding> {
    let gatekeeper: HashSet<&Origin> = repository.gatekeeper.iter().map(|d| &d.origin).collect();
    analysis::analyze(&repository.system, scopes)
        .into_iter()
        .filter_map(|found| {
            let first = found.mutators.first()?;
            let origin = repository.origins.get(first)?;
            let (category, message) =
                if found.severity() == Severity::Error && gatekeeper.contains(origin) {
                    (
                        Category::AcceptedByGatekeeper(found.rule),
                        format!(
                            "{}; a warning, not an error, because Gatekeeper {} installs it as it is (its apiVersion is {})",
                            found.message,
                            gatekeeper::GATEKEEPER_VERSION,
                            sartor_api::GATEKEEPER_GROUP
                        ),
                    )
                } else {
                    (Category::Analysis(found.rule), found.message.clone())
                };
            Some(Finding {
                category,
                origin: origin.clone(),
                subject: Some(first.to_string()),
                message,
                analysis: Some(Box::new(found)),
            })
        })
        .collect()
}

/// The externalData mutators asking a Provider that `repository` does not
/// define, when it defines some (a repository without Providers keeps them
/// in the cluster): in a cluster without that Provider, every admission
/// they match fails per their failurePolicy.
pub fn provider_findings(repository: &Repository) -> Vec<Finding> {
    if repository.providers.is_empty() {
        return Vec::new();
    }
    let mut names: Vec<&str> = repository
        .providers
        .iter()
        .map(|p| p.provider.name())
        .collect();
    names.sort_unstable();
    repository
        .system
        .mutators()
        .filter_map(|mutator| {
            let provider = mutator.provider()?;
            if names.contains(&provider) {
                return None;
            }
            Some(Finding {
                category: Category::Provider,
                origin: repository.origins.get(mutator.id())?.clone(),
                subject: Some(mutator.id().to_string()),
                message: format!(
                    "spec.parameters.assign.externalData.provider: no Provider {provider:?} among those read ({}); in a cluster without it, every admission this mutator matches meets an unknown provider and its failurePolicy decides",
                    names.join(", ")
                ),
                analysis: None,
            })
        })
        .collect()
}

/// The mutators `sartor export map` (with its default options, the kinds
/// of `scopes`) would leave out of a MutatingAdmissionPolicy, each with the
/// reason, at its document.
pub fn export_findings(repository: &Repository, scopes: &Scopes) -> Vec<Finding> {
    let options = sartor_export::Options {
        resources: scopes.clone(),
        ..sartor_export::Options::default()
    };
    let export = sartor_export::map(&repository.system, &repository.specs, &options);
    export
        .refused
        .iter()
        .filter_map(|refusal| {
            Some(Finding {
                category: Category::Export,
                origin: repository.origins.get(&refusal.mutator)?.clone(),
                subject: Some(refusal.mutator.to_string()),
                message: format!(
                    "not exported as a MutatingAdmissionPolicy: {}",
                    refusal.reason
                ),
                analysis: None,
            })
        })
        .collect()
}

/// Where Gatekeeper v3.23.1 would treat the repository's
/// Gatekeeper-apiVersion mutators otherwise: for those that compiled, what it
/// would do differently (placed at the first mutator involved); for those
/// sartor refuses, what Gatekeeper would have done instead (placed at the
/// refused document, whose error stays).
pub fn gatekeeper_findings(repository: &Repository) -> Vec<Finding> {
    let mut compiled = Vec::new();
    let mut findings = Vec::new();
    let finding = |difference: gatekeeper::Difference, origin: &Origin| Finding {
        category: Category::Gatekeeper(difference.class),
        origin: origin.clone(),
        subject: difference.mutators.first().map(ToString::to_string),
        message: difference.message,
        analysis: None,
    };
    for document in &repository.gatekeeper {
        match parse_mutator(&document.value) {
            Ok(object)
                if repository
                    .origins
                    .get(&MutatorId::new(object.kind(), object.name()))
                    == Some(&document.origin) =>
            {
                compiled.push(object);
            }
            _ => findings.extend(
                gatekeeper::refusal_notes(&document.value)
                    .into_iter()
                    .map(|difference| finding(difference, &document.origin)),
            ),
        }
    }
    let objects: Vec<_> = compiled.iter().collect();
    findings.extend(
        gatekeeper::differences(&repository.system, &objects)
            .into_iter()
            .filter_map(|difference| {
                let origin = repository.origins.get(difference.mutators.first()?)?;
                Some(finding(difference, origin))
            }),
    );
    findings
}

/// A repository read whole: the mutators found among its documents (and
/// those of `--mutators`) compiled, and every other document.
#[derive(Debug)]
pub struct Repository {
    /// The mutators that compiled.
    pub system: System,
    /// Every problem with the mutators or the inputs, in input order.
    pub findings: Vec<Finding>,
    /// Where each mutator of the system was read.
    pub origins: HashMap<MutatorId, Origin>,
    /// Each mutator's object as read, by id (what `sartor export` translates).
    pub specs: HashMap<MutatorId, MutatorObject>,
    /// How many mutator documents were found among the inputs.
    pub found: usize,
    /// The expansion templates found (in `--mutators` or the inputs) that
    /// are valid; the others are findings.
    pub templates: Vec<LoadedTemplate>,
    /// The external data providers found (in `--mutators` or the inputs).
    pub providers: Vec<LoadedProvider>,
    /// The mutator documents with a Gatekeeper apiVersion, valid or not, in
    /// input order: what [`gatekeeper_findings`] compares with Gatekeeper.
    pub gatekeeper: Vec<Document>,
    /// Whether `others` holds every object (else only the Namespaces: see
    /// [`repository_with`]).
    pub objects_kept: bool,
    /// Where the documents of `--mutators` were read (`file`, `file:
    /// document N`), which are never objects.
    pub explicit_origins: HashSet<String>,
    /// The documents that are not mutators, in input order.
    pub others: Vec<Document>,
    /// The kinds the CustomResourceDefinitions among the inputs define
    /// (kept whether or not `objects_kept`): what [`Repository::scopes`]
    /// adds to the built-in kinds.
    pub crds: Vec<ApiResource>,
    /// How many documents were left out: kustomize's files, and documents
    /// that are not Kubernetes objects.
    pub skipped: usize,
    /// The documents left out because they are not Kubernetes objects, in
    /// input order (`--mutators` first): see [`Repository::not_objects`].
    pub not_objects: Vec<NotObject>,
}

/// A document of the inputs that is not a Kubernetes object, left out.
#[derive(Debug, Clone)]
pub struct NotObject {
    /// Where it was read.
    pub origin: Origin,
    /// Whether its file was named on the command line (or is standard
    /// input) rather than found in a directory.
    pub named: bool,
    /// What is wrong with it ([`object_problem`]).
    pub problem: String,
}

/// Reads `explicit` (`--mutators`: every document must be a mutator or an
/// ExpansionTemplate) and `inputs` (a repository: documents whose apiVersion
/// is a mutation group are mutators, `expansion.gatekeeper.sh` ones
/// ExpansionTemplates, the other Kubernetes objects are returned as others),
/// and compiles all the mutators into one System; a kind and name defined in
/// two places is a duplicate. In both, kustomize's files and documents that
/// are not Kubernetes objects (no string `apiVersion` and `kind`: a
/// `values.yaml`, a `renovate.json`) are skipped, and a file given twice (a
/// directory and a file in it) is read once.
pub fn repository(explicit: &[String], inputs: &[Input]) -> Repository {
    repository_with(explicit, inputs, &mut std::io::stdin().lock(), usize::MAX)
}

/// What a document of the inputs is to `sartor mutate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not read: kustomize's files, documents that are not Kubernetes objects.
    Skipped,
    /// An ExpansionTemplate.
    Template,
    /// A mutator or an external data Provider: the mutator set.
    Mutator,
    /// Anything else: an object to mutate (a Namespace serves selectors too).
    Object,
}

impl Role {
    /// The role of `document` among the inputs.
    pub fn of(document: &Document) -> Role {
        let value = &document.value;
        if is_kustomize_document(value) || object_problem(value).is_some() {
            Role::Skipped
        } else if is_expansion_template_document(value) {
            Role::Template
        } else if is_mutator_document(value) || is_provider_document(value) {
            Role::Mutator
        } else {
            Role::Object
        }
    }
}

/// [`repository`], reading `-` from `stdin` (once: `--mutators -` leaves
/// nothing for an input `-`) and keeping at most `keep_objects` objects:
/// past that, `others` holds only the Namespace objects (what
/// namespaceSelectors need), `objects_kept` is false and the caller reads
/// the objects again, one at a time ([`visit_objects`]), so that memory does
/// not grow with them.
pub fn repository_with(
    explicit: &[String],
    inputs: &[Input],
    stdin: &mut dyn std::io::Read,
    keep_objects: usize,
) -> Repository {
    let explicit: Vec<Input> = explicit.iter().map(|p| Input::from_arg(p)).collect();
    // Files named on the command line (and stdin): a document in one that is
    // not an object was meant as one; in a directory it may be anything.
    let named: HashSet<String> = explicit
        .iter()
        .chain(inputs)
        .filter(|input| !matches!(input, Input::Path(path) if path.is_dir()))
        .map(ToString::to_string)
        .collect();
    let mut not_objects = Vec::new();
    let mut left_out = |document: &Document| {
        if let Some(problem) = object_problem(&document.value)
            && !is_kustomization_file(&document.origin.file)
        {
            not_objects.push(NotObject {
                origin: document.origin.clone(),
                named: named.contains(&document.origin.file),
                problem,
            });
        }
    };
    let (explicit, mut errors) = read_documents_with_stdin(&explicit, stdin);
    let mut seen: HashSet<String> = HashSet::new();
    let explicit: Vec<Document> = explicit
        .into_iter()
        .filter(|d| seen.insert(d.origin.to_string()))
        .collect();
    let explicit_origins = seen.clone();
    let (skipped_explicit, explicit): (Vec<Document>, Vec<Document>) = explicit
        .into_iter()
        .partition(|d| Role::of(d) == Role::Skipped);
    skipped_explicit.iter().for_each(&mut left_out);
    let (mut template_documents, mut documents): (Vec<Document>, Vec<Document>) = explicit
        .into_iter()
        .partition(|d| Role::of(d) == Role::Template);
    let mut mutators = Vec::new();
    let mut others = Vec::new();
    let mut objects = 0usize;
    let mut skipped = skipped_explicit.len();
    let mut crds = Vec::new();
    let mut crd_findings = Vec::new();
    visit_documents(inputs, stdin, &mut |read| match read {
        Err(error) => errors.push(error),
        Ok(document) if !seen.insert(document.origin.to_string()) => {}
        Ok(document) => match Role::of(&document) {
            Role::Skipped => {
                skipped += 1;
                left_out(&document);
            }
            Role::Template => template_documents.push(document),
            Role::Mutator => mutators.push(document),
            Role::Object => {
                match ApiResource::of_crd(&document.value) {
                    Ok(Some(kind)) => crds.push(kind),
                    Ok(None) => {}
                    Err(error) => crd_findings.push(Finding {
                        category: Category::Load,
                        origin: document.origin.clone(),
                        subject: None,
                        message: error.to_string(),
                        analysis: None,
                    }),
                }
                objects += 1;
                if objects == keep_objects.saturating_add(1) {
                    others.retain(|d: &Document| namespace_name(&d.value).is_some());
                }
                if objects <= keep_objects || namespace_name(&document.value).is_some() {
                    others.push(document);
                }
            }
        },
    });
    let found = mutators
        .iter()
        .filter(|d| is_mutator_document(&d.value))
        .count();
    documents.extend(mutators);
    let gatekeeper = documents
        .iter()
        .filter(|d| is_mutator_document(&d.value) && gatekeeper::is_gatekeeper(&d.value))
        .cloned()
        .collect();
    let mut templates = Vec::new();
    let mut names: HashMap<String, Origin> = HashMap::new();
    for document in &template_documents {
        match template_from_document(document) {
            Ok(loaded) => {
                let name = loaded.template.metadata.name.clone().unwrap_or_default();
                if let Some(first) = names.get(&name) {
                    errors.push(LoadError {
                        origin: loaded.origin.clone(),
                        subject: Some(format!("ExpansionTemplate {name}")),
                        problem: Box::new(Problem::Duplicate(first.clone())),
                    });
                } else {
                    names.insert(name, loaded.origin.clone());
                    templates.push(loaded);
                }
            }
            Err(error) => errors.push(error),
        }
    }
    let loaded = mutators_from_documents(&documents, errors);
    let specs = loaded
        .mutators
        .iter()
        .map(|m| {
            let id = MutatorId::new(m.object.kind(), m.object.name());
            (id, m.object.clone())
        })
        .collect();
    let (system, mut findings, origins, providers) = compile(loaded);
    let mut repository = Repository {
        system,
        providers,
        gatekeeper,
        findings: Vec::new(),
        origins,
        specs,
        found,
        templates,
        others,
        crds,
        skipped,
        not_objects,
        objects_kept: objects <= keep_objects,
        explicit_origins,
    };
    // Templates that generate each other are refused, with or without
    // --expand, built-ins included (yours may cycle through them).
    if let Err(finding) = repository.expander(true) {
        findings.push(finding);
    }
    findings.extend(crd_findings);
    repository.findings = findings;
    repository
}

/// Reads `inputs` again (after [`repository_with`] without objects) and
/// hands `visit` each object `others` would have held, in order, each file
/// once (`explicit_origins`: [`Repository::explicit_origins`]); problems
/// were reported by the first read.
pub fn visit_objects(
    explicit_origins: &HashSet<String>,
    inputs: &[Input],
    stdin: &mut dyn std::io::Read,
    visit: &mut dyn FnMut(Document),
) {
    let mut seen = explicit_origins.clone();
    visit_documents(inputs, stdin, &mut |read| {
        if let Ok(document) = read
            && seen.insert(document.origin.to_string())
            && Role::of(&document) == Role::Object
        {
            visit(document);
        }
    });
}

/// Why a document is not a Kubernetes object (a mapping with a non-empty
/// string `apiVersion` and `kind`), in kubectl's words where it has them
/// ("apiVersion not set"); `None` when it is one.
pub fn object_problem(value: &Value) -> Option<String> {
    let Value::Object(fields) = value else {
        return Some(format!(
            "the document is {}, not a mapping",
            json_type(value)
        ));
    };
    let field = |name: &str| match fields.get(name) {
        None | Some(Value::Null) => Some(format!("{name} not set")),
        Some(Value::String(text)) if text.is_empty() => Some(format!("{name} not set")),
        Some(Value::String(_)) => None,
        Some(other) => Some(format!("{name} is {}, not a string", json_type(other))),
    };
    let problems: Vec<String> = [field("apiVersion"), field("kind")]
        .into_iter()
        .flatten()
        .collect();
    (!problems.is_empty()).then(|| problems.join(", "))
}

/// Whether `file` is a kustomization by its name, as kustomize finds one
/// (an `apiVersion` is optional there): skipped, never said.
fn is_kustomization_file(file: &str) -> bool {
    std::path::Path::new(file)
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| {
            ["kustomization.yaml", "kustomization.yml", "Kustomization"].contains(&name)
        })
}

/// Whether a document is kustomize configuration (`kustomize.config.k8s.io`:
/// a Kustomization or a Component), not an object of the cluster.
fn is_kustomize_document(value: &Value) -> bool {
    api_group(value) == Some("kustomize.config.k8s.io")
}

impl Repository {
    /// The documents that are not Kubernetes objects, as errors (category
    /// load): those of files named on the command line or standard input
    /// always (an explicit input has no excuse to be something else), those
    /// found in a directory only when `strict`.
    pub fn not_object_findings(&self, strict: bool) -> Vec<Finding> {
        self.not_objects
            .iter()
            .filter(|d| d.named || strict)
            .map(|d| Finding {
                category: Category::Load,
                origin: d.origin.clone(),
                subject: None,
                message: format!("not a Kubernetes object: {}", d.problem),
                analysis: None,
            })
            .collect()
    }

    /// One line per file found in a directory that holds documents which are
    /// not Kubernetes objects: the file, and each document skipped with why.
    pub fn skipped_notes(&self) -> Vec<String> {
        let mut files: Vec<(&str, Vec<String>)> = Vec::new();
        for d in self.not_objects.iter().filter(|d| !d.named) {
            let why = match (d.origin.document, d.origin.item) {
                (Some(document), Some(item)) => {
                    format!("document {document}, item {item}: {}", d.problem)
                }
                (Some(document), None) => format!("document {document}: {}", d.problem),
                _ => d.problem.clone(),
            };
            match files.iter_mut().find(|(file, _)| *file == d.origin.file) {
                Some((_, reasons)) => reasons.push(why),
                None => files.push((&d.origin.file, vec![why])),
            }
        }
        files
            .into_iter()
            .map(|(file, reasons)| {
                format!(
                    "{file}: skipped what is not a Kubernetes object: {}",
                    reasons.join("; ")
                )
            })
            .collect()
    }

    /// Which kinds are namespaced: the built-in kinds, those listed in the
    /// `api_resources` files (`kubectl api-resources` output), then those
    /// of the CRDs among the inputs, each later source winning; and a
    /// finding (category load, placed at the file) per file that cannot be
    /// read or is not `kubectl api-resources` output, naming the line.
    pub fn scopes(&self, api_resources: &[String]) -> (Scopes, Vec<Finding>) {
        let mut scopes = Scopes::builtin().clone();
        let mut findings = Vec::new();
        for file in api_resources {
            match std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|text| {
                    ApiResource::parse(&text)
                        .map_err(|e| format!("not `kubectl api-resources` output: {e}"))
                }) {
                Ok(resources) => scopes.extend_listed(resources),
                Err(message) => findings.push(Finding {
                    category: Category::Load,
                    origin: Origin {
                        file: file.clone(),
                        document: None,
                        item: None,
                    },
                    subject: None,
                    message,
                    analysis: None,
                }),
            }
        }
        scopes.extend(self.crds.iter().cloned());
        (scopes, findings)
    }

    /// An expander of its templates, with the built-in ones unless
    /// `builtins` is false; a cycle among them is a finding.
    pub fn expander(&self, builtins: bool) -> Result<Expander, Finding> {
        let templates: Vec<Template> = self
            .templates
            .iter()
            .map(|t| Template::compile(&t.template))
            .collect();
        let expander = if builtins {
            Expander::with_builtins(templates)
        } else {
            Expander::new(templates)
        };
        expander.map_err(|error| Finding {
            category: Category::Load,
            analysis: None,
            origin: self
                .templates
                .iter()
                .find(|t| match &error {
                    TemplatesError::Cycle(names) => names
                        .iter()
                        .any(|n| Some(n) == t.template.metadata.name.as_ref()),
                })
                .map_or_else(
                    || Origin {
                        file: "(built-in templates)".to_string(),
                        document: None,
                        item: None,
                    },
                    |t| t.origin.clone(),
                ),
            subject: None,
            message: error.to_string(),
        })
    }
}

/// Compiles what the loader read into a System, every problem a finding.
fn compile(
    loaded: Loaded,
) -> (
    System,
    Vec<Finding>,
    HashMap<MutatorId, Origin>,
    Vec<LoadedProvider>,
) {
    let compiled = sartor_engine::compile(loaded);
    let mut findings: Vec<Finding> = compiled
        .errors
        .iter()
        .map(|error| Finding {
            category: match error {
                FileError::Load(_) => Category::Load,
                FileError::Compile { .. } => Category::Compile,
            },
            analysis: None,
            origin: error.origin().clone(),
            subject: error.subject(),
            message: error.message(),
        })
        .collect();
    findings.extend(
        compiled
            .conflicts()
            .into_iter()
            .map(|(origin, id, conflict)| Finding {
                category: Category::Conflict,
                analysis: None,
                origin: origin.clone(),
                subject: Some(id.to_string()),
                message: conflict.to_string(),
            }),
    );
    (
        compiled.system,
        findings,
        compiled.origins.into_iter().collect(),
        compiled.providers,
    )
}

/// Reads the Namespace objects under `paths` (`--namespaces`), by name, and
/// a message for every unreadable input or object that is not a Namespace.
pub fn namespaces(paths: &[String]) -> (HashMap<String, Value>, Vec<String>) {
    namespaces_with(paths, &mut std::io::stdin().lock())
}

/// [`namespaces`], reading `-` from `stdin`.
pub fn namespaces_with(
    paths: &[String],
    stdin: &mut dyn std::io::Read,
) -> (HashMap<String, Value>, Vec<String>) {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::from_arg(p)).collect();
    let (documents, errors) = read_documents_with_stdin(&inputs, stdin);
    let mut messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let mut namespaces = HashMap::new();
    for document in documents {
        match namespace_name(&document.value) {
            Some(name) => {
                namespaces.insert(name.to_string(), document.value);
            }
            None => messages.push(format!(
                "{}: --namespaces takes v1 Namespace objects only",
                document.origin
            )),
        }
    }
    (namespaces, messages)
}

/// The name of a core v1 Namespace object.
pub fn namespace_name(value: &Value) -> Option<&str> {
    if !Gvk::of(value).is_namespace() {
        return None;
    }
    value.get("metadata")?.get("name")?.as_str()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const INPUT: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n\
        apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n\
        apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: pull}\n\
        spec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod]}]\n  \
        location: 'spec.containers[name: *].imagePullPolicy'\n  \
        parameters: {assign: {value: Always}}\n---\n\
        apiVersion: v1\nkind: Pod\nmetadata: {name: b}\n---\n\
        apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";

    fn names(documents: &[Document]) -> Vec<String> {
        documents
            .iter()
            .map(|d| d.value["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Past `keep_objects`, only the Namespaces are kept, and a second read
    /// gives every object in order, and nothing else.
    #[test]
    fn objects_past_the_limit_are_read_again_one_at_a_time() {
        let inputs = [Input::Stdin];
        let kept = repository_with(&[], &inputs, &mut INPUT.as_bytes(), usize::MAX);
        assert!(kept.objects_kept);
        assert_eq!(names(&kept.others), ["a", "shop", "b"]);

        let streamed = repository_with(&[], &inputs, &mut INPUT.as_bytes(), 1);
        assert!(!streamed.objects_kept);
        assert_eq!(names(&streamed.others), ["shop"]);
        assert_eq!(streamed.system.len(), 1);
        assert_eq!((streamed.found, streamed.skipped), (1, 1));
        let mut objects = Vec::new();
        visit_objects(
            &streamed.explicit_origins,
            &inputs,
            &mut INPUT.as_bytes(),
            &mut |document| objects.push(document),
        );
        assert_eq!(names(&objects), names(&kept.others));
        assert_eq!(
            objects
                .iter()
                .map(|d| d.origin.to_string())
                .collect::<Vec<_>>(),
            [
                "<stdin>: document 1",
                "<stdin>: document 2",
                "<stdin>: document 4"
            ]
        );
    }
}
