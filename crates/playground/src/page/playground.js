// sartor playground: the panes go to POST /api/evaluate as the user types
// (debounced); each view shows what the CLI printed for them.
"use strict";

const COMMANDS = {
  mutate: "sartor mutate -m mutators.yaml CONTEXT objects.yaml",
  diff: "sartor mutate -m mutators.yaml CONTEXT --diff objects.yaml",
  explain: "sartor mutate -m mutators.yaml CONTEXT --explain objects.yaml",
  suite: "sartor mutate -m mutators.yaml CONTEXT -o suite objects.yaml",
  lint: "sartor lint --export-map mutators.yaml",
  export: "sartor export map mutators.yaml",
};
const DEBOUNCE_MS = 300;

const $ = (id) => document.getElementById(id);
const fields = ["mutators", "objects", "apiResources", "namespace", "namespaceLabels", "operation", "username"];
const flags = ["expand"];
let view = "mutate";
let result = null;
let sent = 0;
let timer = null;

function state() {
  const s = {};
  for (const f of fields) s[f] = $(f).value;
  for (const f of flags) s[f] = $(f).checked;
  return s;
}

function setState(s) {
  for (const f of fields) if (typeof s[f] === "string") $(f).value = s[f];
  for (const f of flags) if (typeof s[f] === "boolean") $(f).checked = s[f];
}

// The panes as a URL fragment: JSON, UTF-8, base64url. Browsers never send
// the fragment to a server.
function encodeState(s) {
  const bytes = new TextEncoder().encode(JSON.stringify(s));
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function decodeState(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(base64);
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
}

function status(text) {
  $("status").textContent = text;
}

// The flags the context adds to sartor mutate, as the server passes them.
function contextFlags() {
  let flags = "-n " + ($("namespace").value || "default") + " --operation " + $("operation").value;
  if ($("username").value) flags += " --username " + $("username").value;
  if ($("namespaceLabels").value.trim()) flags += " --namespaces namespace.yaml";
  if ($("apiResources").value.trim()) flags += " --api-resources api-resources.txt";
  if ($("expand").checked) flags += " --expand";
  return flags;
}

// Line numbers beside the mutators, each finding's line marked.
function renderLines() {
  const count = $("mutators").value.split("\n").length;
  const marks = new Map();
  for (const p of (result && result.problems) || []) {
    if (p.line && marks.get(p.line) !== "error") marks.set(p.line, p.severity);
  }
  const gutter = $("mutators-lines");
  gutter.replaceChildren();
  for (let line = 1; line <= count; line++) {
    const span = document.createElement("span");
    const mark = marks.get(line);
    span.textContent = (mark ? "● " : "") + line + "\n";
    if (mark) {
      span.className = mark;
      span.dataset.line = String(line);
    }
    gutter.appendChild(span);
  }
  gutter.scrollTop = $("mutators").scrollTop;
}

// Selects line `line` of the mutators pane and shows it.
function goToLine(line) {
  const text = $("mutators").value;
  let start = 0;
  for (let i = 1; i < line && start !== -1; i++) start = text.indexOf("\n", start) + 1 || -1;
  if (start === -1) return;
  const end = text.indexOf("\n", start);
  const area = $("mutators");
  area.focus();
  area.setSelectionRange(start, end === -1 ? text.length : end);
  const height = area.scrollHeight / text.split("\n").length;
  area.scrollTop = Math.max(0, (line - 3) * height);
}

function renderProblems() {
  const list = $("problems");
  list.replaceChildren();
  for (const p of (result && result.problems) || []) {
    const item = document.createElement("li");
    item.className = p.severity;
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = (p.line ? "line " + p.line + ": " : "") + p.severity + ": " + p.text;
    if (p.line) button.addEventListener("click", () => goToLine(p.line));
    else button.disabled = true;
    item.appendChild(button);
    list.appendChild(item);
  }
}

function render() {
  const command = COMMANDS[view].replace("CONTEXT", contextFlags());
  $("command").textContent = "$ " + command;
  renderLines();
  if (!result) return;
  renderProblems();
  if (result.error) {
    $("err").textContent = result.error;
    $("out").textContent = "";
    return;
  }
  const run = result[view];
  $("err").textContent = run.err;
  $("out").textContent = run.out;
  status("exit " + run.exit + (run.exit === 0 ? "" : run.exit === 1 ? " (a mutation failed or something was left out)" : " (invalid input)"));
}

async function evaluate() {
  const number = ++sent;
  status("evaluating…");
  let answer;
  try {
    const response = await fetch("api/evaluate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(state()),
    });
    answer = await response.json();
  } catch (e) {
    answer = { error: "the playground did not answer: " + e };
  }
  // An older answer arriving after a newer request is dropped.
  if (number !== sent) return;
  result = answer;
  if (answer.error) status("refused");
  render();
}

function changed() {
  clearTimeout(timer);
  timer = setTimeout(evaluate, DEBOUNCE_MS);
}

function selectTab(tab, focus) {
  for (const t of document.querySelectorAll('[role="tab"]')) {
    const on = t === tab;
    t.setAttribute("aria-selected", on ? "true" : "false");
    t.tabIndex = on ? 0 : -1;
  }
  if (focus) tab.focus();
  view = tab.dataset.view;
  $("view").setAttribute("aria-labelledby", tab.id);
  render();
}

async function share() {
  const url = location.href.split("#")[0] + "#s=" + encodeState(state());
  history.replaceState(null, "", url);
  try {
    await navigator.clipboard.writeText(url);
    status("share link copied");
  } catch (e) {
    status("share link in the address bar");
  }
}

async function start() {
  const tabs = Array.from(document.querySelectorAll('[role="tab"]'));
  for (const tab of tabs) {
    tab.addEventListener("click", () => selectTab(tab, false));
    tab.addEventListener("keydown", (event) => {
      const at = tabs.indexOf(tab);
      const next = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[event.key];
      if (next === undefined) return;
      event.preventDefault();
      selectTab(tabs[(next + tabs.length) % tabs.length], true);
    });
  }
  for (const f of fields) $(f).addEventListener("input", changed);
  $("mutators").addEventListener("input", renderLines);
  $("mutators").addEventListener("scroll", () => {
    $("mutators-lines").scrollTop = $("mutators").scrollTop;
  });
  for (const f of flags) $(f).addEventListener("change", changed);
  $("share").addEventListener("click", share);

  let examples = [];
  try {
    examples = await (await fetch("api/examples")).json();
  } catch (e) {
    status("the examples did not load: " + e);
  }
  examples.forEach((example, index) => {
    const option = document.createElement("option");
    option.value = String(index);
    option.textContent = example.name;
    $("example").appendChild(option);
  });
  $("example").addEventListener("change", () => {
    const example = examples[Number($("example").value)];
    if (!example) return;
    setState({ mutators: example.mutators, objects: example.objects, apiResources: "", namespace: "default", namespaceLabels: "", operation: "CREATE", username: "", expand: false });
    evaluate();
  });

  const fragment = location.hash.match(/^#s=([A-Za-z0-9_-]+)$/);
  if (fragment) {
    try {
      setState(decodeState(fragment[1]));
    } catch (e) {
      status("the share link could not be read: " + e);
    }
  } else if (examples.length > 0) {
    $("example").value = "0";
    setState({ mutators: examples[0].mutators, objects: examples[0].objects });
  }
  render();
  evaluate();
}

start();
