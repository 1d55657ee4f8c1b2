//! The differential run: both sides on the same cases, the differences
//! found, classified, and the undocumented ones minimized to a reproducer.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::case::{Answer, Case};
use crate::classes::classify;
use crate::compare::{Difference, acceptance, effect};
use crate::oracle::{Oracle, OracleError};
use crate::sartor;

/// One difference on one case.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The case as generated.
    pub case: Case,
    /// What differs.
    pub difference: Difference,
    /// The known class that recognises it.
    pub class: Option<&'static str>,
    /// sartor's answer (on the residual case, for an effect difference
    /// after a mutator was accepted by one side only).
    pub sartor: Answer,
    /// Gatekeeper's answer, likewise.
    pub gatekeeper: Answer,
}

impl Finding {
    /// A rough cause, for grouping: the kind of difference, the kinds
    /// involved, and the first words of a refusal or the places that
    /// differ with list positions left out.
    pub fn cause(&self) -> String {
        let object = format!(
            "{} {}",
            crate::case::group_of(&self.case.object),
            self.case
                .object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
        );
        match &self.difference {
            Difference::Acceptance {
                index,
                sartor,
                gatekeeper,
                ..
            } => {
                let kind = self
                    .case
                    .mutators
                    .get(*index)
                    .and_then(|m| m.get("kind"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let (side, why) = match (sartor, gatekeeper) {
                    (Some(why), _) => ("sartor refuses", why),
                    (_, Some(why)) => ("Gatekeeper refuses", why),
                    _ => ("", &String::new()),
                };
                let why: String = why
                    .split_once(": ")
                    .map_or(why.as_str(), |(_, rest)| rest)
                    .chars()
                    .take(70)
                    .collect();
                format!("{side} {kind}: {why}")
            }
            Difference::Outcome { sartor, gatekeeper } => {
                format!("outcome on {object}: sartor {sartor}, Gatekeeper {gatekeeper}")
            }
            Difference::Object { paths } => {
                format!("object {object} at {}", places(paths))
            }
            Difference::Conflicts { .. } => "schema conflicts".to_string(),
            Difference::TemplateAcceptance {
                sartor, gatekeeper, ..
            } => {
                let (side, why) = match (sartor, gatekeeper) {
                    (Some(why), _) => ("sartor refuses", why.as_str()),
                    (_, Some(why)) => ("Gatekeeper refuses", why.as_str()),
                    _ => ("", ""),
                };
                let why: String = why.chars().take(70).collect();
                format!("{side} ExpansionTemplate: {why}")
            }
            Difference::Expansion { sartor, gatekeeper } => {
                let word = |s: &str| s.split(' ').next().unwrap_or("").to_string();
                format!(
                    "expansion of {object}: sartor {}, Gatekeeper {}",
                    word(sartor),
                    word(gatekeeper)
                )
            }
            Difference::Generated { resource, paths } => {
                let kind = resource.split(' ').nth(1).unwrap_or("");
                format!("generated {kind} from {object} at {}", places(paths))
            }
        }
    }

    /// What a minimized case must keep: its class and rough cause.
    fn signature(&self) -> (Option<&'static str>, String) {
        (self.class, self.cause())
    }
}

/// JSON pointers with list positions left out (`/spec/containers/*/image`).
fn places(paths: &[String]) -> String {
    let places: Vec<String> = paths
        .iter()
        .map(|p| {
            p.split('/')
                .map(|s| if s.parse::<usize>().is_ok() { "*" } else { s })
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    places.join(" ")
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Cases run.
    pub cases: usize,
    /// Cases with at least one difference.
    pub divergent: usize,
    /// Differences per class (`undocumented` for none).
    pub per_class: BTreeMap<String, usize>,
    /// One finding per class, the first met (an example for the report).
    pub examples: BTreeMap<String, Finding>,
    /// Findings no documented class recognises, the first few.
    pub undocumented: Vec<Finding>,
    /// Undocumented findings in all.
    pub undocumented_count: usize,
    /// Undocumented findings by a rough cause ([`Finding::cause`]), to
    /// group what no class explains yet.
    pub undocumented_causes: BTreeMap<String, usize>,
}

/// Undocumented findings kept in full (the rest are counted).
const KEPT: usize = 200;

impl Report {
    /// Adds the findings of one case.
    pub fn add(&mut self, findings: Vec<Finding>, documented: &BTreeSet<String>) {
        self.cases += 1;
        if !findings.is_empty() {
            self.divergent += 1;
        }
        for finding in findings {
            let known = finding.class.filter(|id| documented.contains(*id));
            let key = known.unwrap_or("undocumented").to_string();
            *self.per_class.entry(key.clone()).or_default() += 1;
            if known.is_none() {
                self.undocumented_count += 1;
                *self.undocumented_causes.entry(finding.cause()).or_default() += 1;
                if self.undocumented.len() < KEPT {
                    self.undocumented.push(finding.clone());
                }
            }
            self.examples.entry(key).or_insert(finding);
        }
    }
}

/// Both sides on `cases`; the findings of each case, in order.
///
/// A mutator accepted by one side only changes what the other does with
/// the object, so outcomes are compared on the *residual* case: the mutators
/// both sides accept.
///
/// # Errors
/// When the oracle fails.
pub fn check(oracle: &mut Oracle, cases: &[Case]) -> Result<Vec<Vec<Finding>>, OracleError> {
    let gatekeeper = oracle.answer_all(cases)?;
    let mut findings: Vec<Vec<Finding>> = Vec::with_capacity(cases.len());
    let mut residual: Vec<(usize, Case)> = Vec::new();
    let mut sartor_answers = Vec::with_capacity(cases.len());
    for (i, (case, g)) in cases.iter().zip(&gatekeeper).enumerate() {
        let s = sartor::answer(case);
        let accepted = acceptance(&s, g);
        let mut found: Vec<Finding> = accepted
            .into_iter()
            .map(|difference| finding(case, difference, &s, g))
            .collect();
        if found.is_empty() {
            found.extend(
                effect(&s, g)
                    .into_iter()
                    .map(|difference| finding(case, difference, &s, g)),
            );
        } else {
            let both = case
                .retain_mutators(|index, _| {
                    s.mutators.get(index).is_some_and(|v| v.accepted)
                        && g.mutators.get(index).is_some_and(|v| v.accepted)
                })
                .retain_templates(|index, _| {
                    s.templates.get(index).is_some_and(|v| v.used())
                        && g.templates.get(index).is_some_and(|v| v.used())
                });
            residual.push((i, both));
        }
        findings.push(found);
        sartor_answers.push(s);
    }
    let residual_cases: Vec<Case> = residual.iter().map(|(_, case)| case.clone()).collect();
    let residual_answers = oracle.answer_all(&residual_cases)?;
    for ((i, both), g) in residual.into_iter().zip(residual_answers) {
        let s = sartor::answer(&both);
        let Some(found) = findings.get_mut(i) else {
            continue;
        };
        let original = cases.get(i).unwrap_or(&both);
        found.extend(
            effect(&s, &g)
                .into_iter()
                .map(|difference| finding_on(original, &both, difference, &s, &g)),
        );
    }
    Ok(findings)
}

fn finding(case: &Case, difference: Difference, s: &Answer, g: &Answer) -> Finding {
    finding_on(case, case, difference, s, g)
}

/// A finding on `original`, seen on `compared` (the residual case).
fn finding_on(
    original: &Case,
    compared: &Case,
    difference: Difference,
    s: &Answer,
    g: &Answer,
) -> Finding {
    let class = classify(compared, &difference, s, g).map(|c| c.id);
    Finding {
        case: original.clone(),
        difference,
        class,
        sartor: s.clone(),
        gatekeeper: g.clone(),
    }
}

/// The smallest case found, by removing mutators, parts of the object and parts of the mutators one at a time, that still shows a
/// difference of the same kind and class as `finding`.
///
/// # Errors
/// When the oracle fails.
pub fn minimize(oracle: &mut Oracle, finding: &Finding) -> Result<Finding, OracleError> {
    let signature = finding.signature();
    let mut best = finding.clone();
    let mut attempts = 0;
    loop {
        let mut progressed = false;
        for candidate in smaller(&best.case) {
            attempts += 1;
            if attempts > 600 {
                return Ok(best);
            }
            let found = check(oracle, std::slice::from_ref(&candidate))?;
            if let Some(same) = found
                .into_iter()
                .flatten()
                .find(|f| f.signature() == signature)
            {
                best = same;
                progressed = true;
                break;
            }
        }
        if !progressed {
            return Ok(best);
        }
    }
}

/// Every case one step smaller than `case`.
fn smaller(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    for i in 0..case.mutators.len() {
        if case.mutators.len() > 1 {
            out.push(case.retain_mutators(|j, _| j != i));
        }
    }
    for i in 0..case.templates.len() {
        out.push(case.retain_templates(|j, _| j != i));
    }
    // The Namespace stays: both sides need it for a namespaced object.
    for smaller_object in without_each(
        &case.object,
        &["apiVersion", "kind", "metadata", "name", "namespace"],
    ) {
        out.push(Case {
            object: smaller_object,
            ..case.clone()
        });
    }
    for (i, mutator) in case.mutators.iter().enumerate() {
        let Some(spec) = mutator.get("spec") else {
            continue;
        };
        for smaller_spec in without_each(
            spec,
            &["location", "applyTo", "assign", "values", "fromList"],
        ) {
            let mut mutators = case.mutators.clone();
            if let Some(m) = mutators.get_mut(i) {
                m["spec"] = smaller_spec;
            }
            out.push(Case {
                mutators,
                ..case.clone()
            });
        }
    }
    out
}

/// `value` with one member or element removed, for each one (not the
/// fields named in `keep`), deepest last.
fn without_each(value: &Value, keep: &[&str]) -> Vec<Value> {
    let mut out = Vec::new();
    match value {
        Value::Object(map) => {
            for key in map.keys() {
                if !keep.contains(&key.as_str()) {
                    let mut copy = map.clone();
                    copy.remove(key);
                    out.push(Value::Object(copy));
                }
            }
            for (key, child) in map {
                for smaller in without_each(child, keep) {
                    let mut copy = map.clone();
                    copy.insert(key.clone(), smaller);
                    out.push(Value::Object(copy));
                }
            }
        }
        Value::Array(items) => {
            for i in 0..items.len() {
                let mut copy = items.clone();
                copy.remove(i);
                out.push(Value::Array(copy));
            }
            for (i, child) in items.iter().enumerate() {
                for smaller in without_each(child, keep) {
                    let mut copy = items.clone();
                    if let Some(slot) = copy.get_mut(i) {
                        *slot = smaller;
                    }
                    out.push(Value::Array(copy));
                }
            }
        }
        _ => {}
    }
    out
}

/// A reproducer file: the case and what each side answers, ready to go in
/// `tests/differential/reproducers/` where the test suite pins both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reproducer {
    /// The class id, or `undocumented`; [`Reproducer::AGREED`] for a case
    /// both sides agree on.
    pub class: String,
    /// Of an agreed case: documented classes it still shows beside the
    /// agreement it pins (e.g. `owner-reference-uid` on every expansion).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub besides: Vec<String>,
    /// What differs, in one line.
    pub difference: String,
    /// The case.
    pub case: Case,
    /// Gatekeeper v3.23.1's answer (the oracle's).
    pub gatekeeper: Answer,
    /// sartor's answer.
    pub sartor: Answer,
}

impl Reproducer {
    /// The class of a case both sides agree on: a difference decided in
    /// Gatekeeper's favour and fixed, pinned so that it stays fixed.
    pub const AGREED: &'static str = "none";

    /// The reproducer of a finding; the answers are to the whole case.
    ///
    /// # Errors
    /// When the oracle fails.
    pub fn of(oracle: &mut Oracle, finding: &Finding) -> Result<Reproducer, OracleError> {
        let class = finding.class.unwrap_or("undocumented");
        Reproducer::answered(oracle, &finding.case, class, finding.difference.to_string())
    }

    /// The reproducer of a case both sides agree on.
    ///
    /// # Errors
    /// When the oracle fails.
    pub fn agreed(oracle: &mut Oracle, case: &Case) -> Result<Reproducer, OracleError> {
        Reproducer::answered(oracle, case, Reproducer::AGREED, "both sides agree".into())
    }

    /// Both sides' answers to `case`, as a reproducer of `class`.
    fn answered(
        oracle: &mut Oracle,
        case: &Case,
        class: &str,
        difference: String,
    ) -> Result<Reproducer, OracleError> {
        let mut case = case.clone();
        case.id = "reproducer".into();
        let gatekeeper = without_stored(oracle.answer(&case)?);
        let sartor = sartor::answer(&case);
        Ok(Reproducer {
            class: class.to_string(),
            besides: Vec::new(),
            difference,
            case,
            gatekeeper,
            sartor,
        })
    }
}

/// An answer without the stored mutators: long, and what the API server
/// would store is checked by the CRD trial on a generated sample instead.
pub fn without_stored(mut answer: Answer) -> Answer {
    for verdict in &mut answer.mutators {
        verdict.stored = None;
    }
    answer
}

/// Runs `count` cases of `seed` in `mode`, a thousand at a time, into `report`;
/// `progress` hears after each batch.
///
/// # Errors
/// When the oracle fails.
pub fn pass(
    oracle: &mut Oracle,
    seed: u64,
    mode: crate::generate::Mode,
    count: usize,
    documented: &BTreeSet<String>,
    report: &mut Report,
    progress: &mut dyn FnMut(&Report),
) -> Result<(), OracleError> {
    const BATCH: usize = 1_000;
    let mut done = 0;
    while done < count {
        let size = BATCH.min(count - done);
        let cases: Vec<Case> = (done..done + size)
            .map(|index| crate::generate::case(seed, mode, index))
            .collect();
        for findings in check(oracle, &cases)? {
            report.add(findings, documented);
        }
        done += size;
        progress(report);
    }
    Ok(())
}
