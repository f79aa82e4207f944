// medrank web page: plain JS, no external resources (the service runs offline).
"use strict";

const $ = (id) => document.getElementById(id);
// The server accepts at most 50 dialogue turns and 64 KiB per request (settings.max_body_bytes); the
// re-ranker reads a dialogue from its end, so the page sends the most recent turns that fit.
const MAX_TURNS = 50;
const MAX_DIALOGUE_BYTES = 48 * 1024;
const state = { complaint: "", symptoms: [], dialogue: [], findings: [], urgent: [], goOn: false };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

const CJK = /[\u3400-\u9fff\uf900-\ufaff]/;
function langOf(text) {
  return CJK.test(text) ? "zh" : "en";
}

// -- requests: one error box and one status line per panel -------------------------------------------
function showError(panel, message) {
  const box = panel.querySelector(".error");
  box.textContent = message;
  box.hidden = !message;
}

function sentence(text) {
  const t = String(text);
  return t.charAt(0).toUpperCase() + t.slice(1);
}

// the patient's words, not the API's: the page cannot pass a language, so it does not suggest one
function languageMessage(ctx) {
  const reads = ctx.read_as ? `This text reads as ${ctx.read_as}.` : "This text has no words medrank can read.";
  return `${reads} medrank understands English and Chinese (中文) only: please describe it in English or Chinese.`;
}

// a symptom list chosen on the page reads another language: the page cannot pass a language, so it points to a list
function listLanguageMessage(ctx) {
  return `The symptom list you chose holds ${ctx.kb_reads} terms and your text reads as ${ctx.text_reads}: choose a ` +
    `list in ${ctx.text_reads}, or "by the language you write in".`;
}

async function api(path, body) {
  const headers = { "Content-Type": "application/json" };
  const token = $("token").value.trim();
  if (token) headers["Authorization"] = "Bearer " + token;
  let res;
  try {
    res = await fetch(path, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  } catch (e) {
    throw new Error(`Cannot reach the medrank server (${e.message}). Check that it is running and try again.`);
  }
  let data = null;
  try { data = await res.json(); } catch (e) { /* not JSON: handled below */ }
  if (!res.ok) {
    const detail = (data && data.detail) || res.statusText || "request failed";
    const first = data && Array.isArray(data.errors) ? data.errors[0] : null;
    if (first && first.type === "unsupported_language") throw new Error(languageMessage(first.ctx || {}));
    if (first && first.type === "knowledge_base_language") throw new Error(listLanguageMessage(first.ctx || {}));
    // a refused request (or one waiting for a build) says what to do; a failure also gives its status for whoever runs it
    throw new Error(res.status < 500 || res.status === 503 ? sentence(detail) : `${sentence(detail)} (server status ${res.status})`);
  }
  if (data === null || typeof data !== "object") throw new Error("The server sent an answer this page cannot read.");
  return data;
}

// Runs one request of a panel: every button of the panel is disabled until it ends (so answers cannot
// arrive out of order), a status line says what is going on, and any failure shows in the panel's box.
async function busy(panel, label, fn) {
  const buttons = [...panel.querySelectorAll("button")];
  buttons.forEach((b) => { b.disabled = true; });
  panel.setAttribute("aria-busy", "true");
  panel.querySelector(".status").textContent = label;
  showError(panel, "");
  try {
    await fn();
  } catch (e) {
    showError(panel, e.message || String(e));
  } finally {
    // buttons rendered during fn are enabled already; the ones disabled here come back
    buttons.forEach((b) => { b.disabled = false; });
    panel.removeAttribute("aria-busy");
    panel.querySelector(".status").textContent = "";
  }
}

function modelLine(data) {
  return `served by ${data.model}${data.trained || /not trained|no trained|zero-shot/.test(data.model) ? "" : " (not trained)"}`;
}

// -- tabs (WAI-ARIA tabs pattern: arrow keys move between tabs) ------------------------------------
const tabs = [...document.querySelectorAll(".tab")];
function selectTab(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.classList.toggle("active", on);
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
  }
  for (const p of document.querySelectorAll(".panel")) p.hidden = p.id !== tab.dataset.panel;
}
tabs.forEach((tab, i) => {
  tab.addEventListener("click", () => selectTab(tab));
  tab.addEventListener("keydown", (ev) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[ev.key];
    const to = ev.key === "Home" ? tabs[0] : ev.key === "End" ? tabs[tabs.length - 1] : step ? tabs[(i + step + tabs.length) % tabs.length] : null;
    if (!to) return;
    ev.preventDefault();
    selectTab(to);
    to.focus();
  });
});
$("token").value = sessionStorage.getItem("medrank-token") || "";
$("token").addEventListener("change", () => sessionStorage.setItem("medrank-token", $("token").value));

// -- patient flow -----------------------------------------------------------------------------------
const patient = $("patient");

$("complaint-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("complaint").value.trim();
  if (!text) { showError(patient, "Please describe what brings you here."); return; }
  // the previous complaint's results go at once: after a failure they must not stay (Confirm would send them)
  for (const id of ["urgent", "symptoms-block", "questions-block", "similar-block"]) $(id).hidden = true;
  state.urgent = [];
  state.goOn = false;
  busy(patient, "Looking up symptoms…", async () => {
    const data = await api("/symptoms", { query: text, k: 5, kb: $("complaint-kb").value });
    state.complaint = text;
    state.symptoms = [];
    state.dialogue = [{ speaker: "patient", text }];
    state.findings = [];
    if (data.terms) showSymptomSet(data, text);
    else showRanking(data);
    showUrgent(data.urgent || [], data.language);
    $("symptoms-meta").textContent = `${data.kb} (${data.language}) · ${modelLine(data)}`;
    // a fallback list answered while the one chosen for the language is still being built: say so
    const building = data.still_building || [];
    // words no list could read yet (the Chinese words of an English complaint while the Chinese list builds, or the
    // other way round)
    const unread = (data.unread || []).map((u) => `“${text.slice(u.span[0], u.span[1])}”`);
    $("symptoms-building").hidden = !building.length && !unread.length;
    $("symptoms-building").textContent = (building.length
      ? `The ${building.join(" and ")} list is still being built: these come from the ${data.kb} list meanwhile. ` +
        "Send your words again in a minute or two for the full list. "
      : "") + (unread.length ? `Not read: ${unread.join(", ")} (no symptom list in their language is ready yet).` : "");
    $("symptoms-block").hidden = false;
    $("questions-block").hidden = true;
    $("similar-block").hidden = true;
    $("symptoms-title").focus();
  });
});

// A decided symptom that is a sign to act on now (thoughts of suicide; chest pain, a face drooping, blue lips …):
// the service's notice, above everything else, with the guidance it follows.
function showUrgent(notices, language) {
  notices = [...notices].sort((a, b) => (a.kind === "crisis" ? 0 : 1) - (b.kind === "crisis" ? 0 : 1));
  $("urgent").replaceChildren(...notices.map((n) => el("p", { class: n.kind, lang: language },
    ...(n.kind === "crisis" ? [el("strong", { text: language === "zh" ? "请现在寻求帮助。" : "Please get help now. " })] : []),
    n.message,
    ...(n.source ? [" ", el("a", { href: n.source, target: "_blank", rel: "noopener noreferrer",
      text: language === "zh" ? "（依据）" : "(guidance)" })] : []))));
  $("urgent").hidden = notices.length === 0;
  state.urgent = notices;
}

// The top-k terms of the knowledge base with their scores, none ticked.
function showRanking(data) {
  $("symptoms").replaceChildren(...data.results.map((r, i) => el("li", {},
    el("input", { type: "checkbox", id: `sym-${i}`, value: r.name }), " ",
    el("label", { for: `sym-${i}`, lang: data.language, text: r.name }),
    el("span", { class: "score", text: r.id === r.name ? r.score.toFixed(3) : `${r.id} · ${r.score.toFixed(3)}` }))));
  $("symptoms-hint").textContent = "Tick the ones that do, then confirm. None is ticked for you.";
  $("complaint-marked").hidden = true;
  $("alternatives-block").hidden = true;
}

// The complaint with the words each decided term covers marked (the term's name on hover).
function markedComplaint(text, terms) {
  const spans = terms.filter((t) => t.span && t.span[1] > t.span[0] && !(t.span[0] === 0 && t.span[1] === text.length))
    .map((t) => ({ start: t.span[0], end: t.span[1], name: t.name })).sort((a, b) => a.start - b.start || b.end - a.end);
  const parts = [];
  let at = 0;
  for (const s of spans) {
    if (s.start < at) continue; // overlapping: the earlier, longer span is kept
    if (s.start > at) parts.push(text.slice(at, s.start));
    parts.push(el("mark", { title: s.name, text: text.slice(s.start, s.end) }));
    at = s.end;
  }
  if (at < text.length) parts.push(text.slice(at));
  return parts;
}

// The set of terms the detector decided (ticked, with the probability and the words each covers) and the
// alternatives to tick.
function showSymptomSet(data, text) {
  const row = (t, i, kind, ticked) => {
    const box = el("input", { type: "checkbox", id: `${kind}-${i}`, value: t.name });
    box.checked = ticked;
    const words = t.span && !(t.span[0] === 0 && t.span[1] === text.length) ? text.slice(t.span[0], t.span[1]) : "";
    // a name or words of another language than the text's (the Chinese words of an English complaint) say so
    return el("li", {}, box, " ", el("label", { for: `${kind}-${i}`, lang: langOf(t.name), text: t.name }),
      el("span", { class: "probability", text: ` ${percent(t.probability)}` }),
      ...(words ? [el("span", { class: "score", lang: langOf(words), text: `“${words}”` })] : []),
      // a term another symptom list decided on words this list leaves uncovered
      ...(t.source ? [el("span", { class: "score", text: ` · from the ${t.source} list` })] : []));
  };
  $("symptoms").replaceChildren(...data.terms.map((t, i) => row(t, i, "sym", true)));
  $("alternatives").replaceChildren(...data.alternatives.map((t, i) => row(t, i, "alt", false)));
  $("alternatives-block").hidden = data.alternatives.length === 0;
  $("complaint-marked").replaceChildren(el("span", { class: "meta", text: "Your words: " }), ...markedComplaint(text, data.terms));
  $("complaint-marked").hidden = data.terms.length === 0;
  $("symptoms-hint").textContent = data.terms.length
    ? "The ones we found are ticked, each with how likely it is that you mean it; untick any that is wrong, tick any other that fits, then confirm."
    : data.alternatives.length
      ? "We are not sure any of these is what you mean: tick the ones that fit, then confirm."
      // a complaint that only says what is absent ("I have no fever") names no symptom to tick
      : "We found no symptom in these words (one you say you do not have is not listed). Describe what you feel, or confirm to go on to the questions.";
}

$("confirm").addEventListener("click", () => {
  // nothing was offered to tick: send none (null), and the service reads the symptoms from the patient's words,
  // a complaint stated after a greeting too; a list the patient unticked confirms none ([])
  const offered = document.querySelectorAll("#symptoms input, #alternatives input").length > 0;
  state.symptoms = offered
    ? [...document.querySelectorAll("#symptoms input:checked, #alternatives input:checked")].map((b) => b.value) : null;
  busy(patient, "Finding questions and similar questions…", async () => {
    // both requests end before the buttons come back; the first failure is the one shown
    const failed = (await Promise.allSettled([rankQuestions(state.dialogue, state.findings), findSimilar()]))
      .find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  });
});

function dialogueToSend(turns) {
  let out = turns.slice(-MAX_TURNS);
  const size = (t) => new TextEncoder().encode(JSON.stringify(t)).length;
  while (out.length > 1 && size(out) > MAX_DIALOGUE_BYTES) out = out.slice(1);
  return out;
}

function renderDialogue(sent) {
  $("dialogue").replaceChildren(...state.dialogue.map((t) => el("li", { class: t.speaker, lang: langOf(t.text), text: t.text })));
  const dropped = state.dialogue.length - sent;
  $("dialogue-meta").hidden = dropped <= 0;
  $("dialogue-meta").textContent = dropped > 0 ? `The ${dropped} oldest turns are no longer sent: the conversation is longer than one request holds.` : "";
}

// the words a person reads for an answer, per language (sent as the patient's turn)
const ANSWERS = {
  en: { present: "yes", absent: "no", unsure: "not sure" },
  zh: { present: "有", absent: "没有", unsure: "不确定" },
};

function percent(p) {
  return p < 0.01 ? "<1 %" : `${Math.round(p * 100)} %`;
}

function sourceText(source) {
  if (source === "self-report") return "you said";
  if (source === "patient") return "you mentioned";
  if (source.startsWith("question:")) return "your answer";
  return source;
}

// Whether a question can be answered yes or no ("Does the pain radiate …?", "有没有…"), not only by one of its
// choices ("How intense is the pain?", "Characterize your pain:").
const YES_NO = {
  en: /^\s*(do|does|did|is|are|was|were|have|has|had|can|could|will|would)\b/i,
  zh: /吗|有没有|是否|是不是/,
};

// One question about a finding: yes / no / not sure, and the answers of a categorical one to choose from (only those
// and "not sure" where the question is not a yes / no one).
function findingQuestion(q, i, language) {
  const words = ANSWERS[language] || ANSWERS.en;
  const answer = (value, said) => {
    const dialogue = [...state.dialogue, { speaker: "doctor", text: q.text }, { speaker: "patient", text: said }];
    const findings = [...state.findings, { name: q.finding, value }];
    busy(patient, "Updating the questions and the conditions…", async () => {
      await rankQuestions(dialogue, findings);
      $("questions-title").focus();
    });
  };
  const choices = q.options && q.options.length ? q.options : [];
  // a question that details a finding already present ("Do you feel pain somewhere?" once pain is known) asks which
  const yesNo = !choices.length || (!q.choice_only && (YES_NO[language] || YES_NO.en).test(q.text));
  const kinds = yesNo ? [["present", "Yes"], ["absent", "No"], ["unsure", "Not sure"]] : [["unsure", "Not sure"]];
  const buttons = kinds.map(([value, text]) => {
    const b = el("button", { type: "button", class: "secondary", "data-value": value, text, "aria-label": `${text}: ${q.text}` });
    b.addEventListener("click", () => answer(value, words[value]));
    return b;
  });
  const parts = [...buttons];
  if (choices.length) {
    const select = el("select", { id: `option-${i}`, "aria-label": `Choose an answer to: ${q.text}` },
      el("option", { value: "", text: yesNo ? "or choose…" : "choose…" }),
      ...choices.map((o) => el("option", { value: o.value, text: o.label })));
    select.addEventListener("change", () => {
      const o = choices.find((x) => x.value === select.value);
      if (o) answer(o.value, o.label);
    });
    if (yesNo) parts.push(select);
    else parts.unshift(select);
  }
  return el("div", { class: "answer-buttons" }, ...parts);
}

// A question from the question bank (no finding behind it): a free-text answer.
function bankQuestion(q, i) {
  const input = el("input", { id: `answer-${i}`, placeholder: "your answer", maxlength: "2000", autocomplete: "off" });
  const label = el("label", { for: `answer-${i}`, class: "visually-hidden", text: `Your answer to: ${q.text}` });
  const button = el("button", { type: "submit", class: "secondary", text: "Answer", "aria-label": `Answer: ${q.text}` });
  const form = el("form", { class: "answer" }, label, input, button);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const answer = input.value.trim();
    if (!answer) { showError(patient, "Type an answer first."); input.focus(); return; }
    const next = [...state.dialogue, { speaker: "doctor", text: q.text }, { speaker: "patient", text: answer }];
    busy(patient, "Re-ranking the questions…", async () => {
      await rankQuestions(next, state.findings);
      $("questions-title").focus();
    });
  });
  return form;
}

function renderFindings(findings, language) {
  $("findings").replaceChildren(...findings.map((f) => el("li", {},
    el("span", { lang: language, text: f.label }), `: ${f.value_label}`, el("span", { class: "score", text: sourceText(f.source) }))));
  $("findings-block").hidden = findings.length === 0;
}

async function showDifferential(sent, findings, language) {
  const data = await api("/differential", { dialogue: sent, findings, symptoms: state.symptoms, language, k: 5 });
  $("differential").replaceChildren(...data.results.map((c) => el("li", {},
    el("span", { class: "condition", lang: language, text: c.label }), " ",
    el("span", { class: "probability", text: percent(c.probability) }),
    ...(c.supporting_labels.length ? [el("span", { class: "score", lang: language, text: `fits: ${c.supporting_labels.join(", ")}` })] : []),
    ...(c.unexplained_labels.length ? [el("span", { class: "score", lang: language, text: `does not explain: ${c.unexplained_labels.join(", ")}` })] : []))));
  // an open-world engine also says how likely the condition is none of those it knows
  const outside = $("differential-outside");
  outside.hidden = data.outside_probability == null;
  // more likely than every listed condition, it is said before them: a list headed by a 6 % condition reads as an
  // answer that is not there
  const first = data.results.length ? data.results[0].probability : 0;
  const leads = data.outside_probability != null && data.outside_probability > first;
  outside.textContent = data.outside_probability == null ? ""
    : leads ? `Most likely a condition none of these: ${percent(data.outside_probability)} (the list holds only the `
      + "conditions of its case collection; those below fit less well)."
    : `A condition none of these: ${percent(data.outside_probability)} (the list holds only the conditions of its case collection).`;
  if (leads) $("differential").before(outside);
  else $("differential").after(outside);
  // a symptom the engine reads no finding from is not weighed: said, so that the list is not read as weighing it
  const notWeighed = $("differential-not-weighed");
  const unweighed = data.symptoms_not_weighed || [];
  notWeighed.hidden = unweighed.length === 0;
  notWeighed.textContent = unweighed.length ? `Not weighed: ${unweighed.join(", ")} (the engine reads none of the `
    + "findings of its case collection in it, so these conditions are ranked without it)." : "";
  $("differential-note").textContent = data.note;
  $("differential-meta").textContent = `${data.engine} · ${modelLine(data)}`;
  $("differential-block").hidden = false;
}

// No condition can be ranked yet: the block says why instead of staying hidden.
function showNoDifferential(note) {
  $("differential").replaceChildren();
  $("differential-outside").hidden = true;
  $("differential-not-weighed").hidden = true;
  $("differential-note").textContent = note;
  $("differential-meta").textContent = "";
  $("differential-block").hidden = false;
}

// Ranks the next questions for `dialogue` and the answered `findings`; the conversation is updated only once
// the server answered. Where the inquiry engine served them, the differential follows.
async function rankQuestions(dialogue, findings) {
  const sent = dialogueToSend(dialogue);
  const data = await api("/next-questions", { dialogue: sent, symptoms: state.symptoms, findings, k: 5 });
  // a symptom ticked from the alternatives may be a sign to act on now: its notice joins those shown (a notice
  // already shown stays, though its symptom was unticked)
  const shown = state.urgent.map((n) => n.kind);
  const added = (data.urgent || []).filter((n) => !shown.includes(n.kind));
  if (added.length) showUrgent([...state.urgent, ...added], data.language);
  const engine = data.engine !== "question-bank";
  // nothing known yet (a greeting the engine still asks after): no condition to rank
  if (engine && data.findings.length) await showDifferential(sent, findings, data.language);
  else if (data.note) showNoDifferential(data.note);
  else $("differential-block").hidden = true;
  state.dialogue = dialogue;
  state.findings = findings;
  renderFindings(data.findings || [], data.language);
  $("questions").replaceChildren(...data.results.map((q, i) => {
    // a finding's question names it already in English; a Chinese finding's "question" is the symptom's name
    const said = q.finding && data.language === "zh" && !/[？?]$/.test(q.text) ? `有没有${q.text}？` : q.text;
    // a bank question's score is a sum of z-scores, which says nothing to a patient: the order says it
    // ("swelling location" is what "Where is the swelling located?" asks: no note)
    const note = !q.finding || said.includes(q.label.replace(/ location$/, "")) ? "" : `asks about: ${q.label}`;
    return el("li", q.finding ? { "data-label": q.label } : {},
      el("span", { class: "question", lang: data.language, text: said }),
      ...(note ? [el("span", { class: "score", text: note })] : []),
      q.finding ? findingQuestion({ ...q, text: said }, i, data.language) : bankQuestion(q, i));
  }));
  $("questions-hint").hidden = !engine;
  $("stop-note").hidden = !data.should_stop;
  $("stop-note").textContent = data.should_stop ? "The answers so far are enough for the list of possible conditions below; more questions may still help your doctor." : "";
  const served = engine ? `${data.engine}: questions about what is not known yet, chosen to tell the possible conditions apart`
    : `question bank (${data.retrieval})`;
  $("questions-meta").textContent = `${served} · ${modelLine(data)}`;
  renderDialogue(sent.length);
  showPaused(data.language);
  $("questions-block").hidden = false;
}

// While a notice asks the patient to get help now, the routine questions ("Do you smoke?") wait behind it until the
// patient chooses to go on: what was understood and the conversation stay in view.
function showPaused(language) {
  const paused = state.urgent.length > 0 && !state.goOn;
  const crisis = state.urgent.some((n) => n.kind === "crisis");
  const zh = language === "zh";
  $("questions-paused-text").textContent = crisis
    ? (zh ? "您的安全最重要。问题可以等一等：请先按照上面的提示寻求帮助。" :
      "Your safety comes first. The questions can wait: please use the help above now.")
    : (zh ? "如果情况正在发生、来得突然或很严重，请先按照上面的提示求助，问题可以稍后再答。" :
      "If this is happening now, came on suddenly or is severe, act on the notice above first: the questions can wait.");
  $("questions-paused-text").lang = zh ? "zh" : "en";
  $("questions-go-on").textContent = crisis ? (zh ? "我现在是安全的，继续回答问题" : "I am safe now: go on with the questions")
    : (zh ? "继续回答问题" : "Go on with the questions");
  $("questions-paused").hidden = !paused;
  $("questions-body").hidden = paused;
}

$("questions-go-on").addEventListener("click", () => {
  state.goOn = true;
  $("questions-paused").hidden = true;
  $("questions-body").hidden = false;
  $("questions-title").focus();
});

// a solved question's answer, folded; its source only as an http(s) link
function answerBlock(r, language) {
  const parts = [el("summary", { text: "Answer" }), el("p", { lang: language, text: r.answer })];
  if (r.answer_url && /^https?:\/\//.test(r.answer_url)) {
    parts.push(el("a", { href: r.answer_url, target: "_blank", rel: "noopener noreferrer", text: "source" }));
  }
  return el("details", { class: "solved-answer" }, ...parts);
}

async function findSimilar() {
  const data = await api("/similar-questions", { question: state.complaint, k: 5 });
  // with no matcher the recall's own score orders the list: BM25's, or a dense search's cosine; where the service
  // calibrated that cosine on labelled question pairs, how likely the question is the same one
  const recallName = data.recall.startsWith("BM25") ? "bm25" : "cosine";
  const scoreText = (r) => r.probability !== null && r.probability !== undefined ? `same question: ${percent(r.probability)}`
    : r.match_score === null ? `${recallName} ${r.recall_score.toFixed(recallName === "bm25" ? 2 : 3)}` : `match ${r.match_score.toFixed(3)}`;
  $("similar").replaceChildren(...data.results.map((r) => el("li", {}, el("span", { lang: data.language, text: r.text }),
    el("span", { class: "score", text: scoreText(r) }),
    ...(r.answer ? [answerBlock(r, data.language)] : []))));
  $("similar-meta").textContent = `${data.recall} · ${modelLine(data)}`;
  $("similar-block").hidden = false;
}

// -- clinician --------------------------------------------------------------------------------------
const clinician = $("clinician");

// the sentences highlighted in a list of passages: the best few over the whole answer, not every one
const HIGHLIGHTED = 3;
// passages longer than this are shortened, with a button to show the rest
const SHORT_CHARS = 420;

function svgEl(name, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function curveSvg(curve, width) {
  // drawn at the box's own width, so labels keep their size on a phone
  const w = Math.max(280, Math.round(width || 800)), h = 200, left = 52, right = 12, top = 26, bottom = 40;
  const s = curve.scores;
  const lo = Math.min(...s), hi = Math.max(...s);
  const step = s.length > 1 ? (w - left - right) / (s.length - 1) : 0;
  const x = (i) => left + (s.length > 1 ? i * step : (w - left - right) / 2);
  const y = (v) => h - bottom - (hi > lo ? ((v - lo) * (h - top - bottom)) / (hi - lo) : (h - top - bottom) / 2);
  const svg = svgEl("svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": `sentence score curve of ${curve.document}` });
  const best = curve.passages.reduce((a, b) => (b.score > (a ? a.score : -Infinity) ? b : a), null);
  curve.passages.forEach((p, k) => {
    const x0 = x(p.start) - step / 2, x1 = x(Math.max(p.start, p.end - 1)) + step / 2;
    const r = svgEl("rect", { x: x0, y: top, width: Math.max(1, x1 - x0), height: h - top - bottom,
      fill: p === best ? "#c6f6d5" : (k % 2 ? "#f3f4f6" : "#e5e7eb") });
    r.append(svgEl("title", {}, `${p.aspect || "passage"}: mean score ${p.score.toFixed(3)}`));
    svg.append(r);
  });
  // axes: score (y) against the sentence's position in the document (x), with their ranges
  svg.append(svgEl("line", { x1: left, y1: top, x2: left, y2: h - bottom, stroke: "#5b6575" }));
  svg.append(svgEl("line", { x1: left, y1: h - bottom, x2: w - right, y2: h - bottom, stroke: "#5b6575" }));
  const small = { "font-size": "11", fill: "#5b6575" };
  svg.append(svgEl("text", { ...small, x: left - 4, y: top + 4, "text-anchor": "end", class: "tick" }, hi.toFixed(2)));
  svg.append(svgEl("text", { ...small, x: left - 4, y: h - bottom, "text-anchor": "end", class: "tick" }, lo.toFixed(2)));
  svg.append(svgEl("text", { ...small, x: left, y: h - bottom + 14, "text-anchor": "middle", class: "tick" }, "1"));
  svg.append(svgEl("text", { ...small, x: x(s.length - 1), y: h - bottom + 14, "text-anchor": "middle", class: "tick" }, String(s.length)));
  svg.append(svgEl("text", { ...small, x: (left + w - right) / 2, y: h - 6, "text-anchor": "middle", class: "axis-label x-label" },
    "sentence of the document (in reading order; shaded bands = its passages, green = best passage)"));
  svg.append(svgEl("text", { ...small, x: 12, y: (top + h - bottom) / 2, "text-anchor": "middle", class: "axis-label y-label",
    transform: `rotate(-90 12 ${(top + h - bottom) / 2})` }, "sentence score"));
  svg.append(svgEl("polyline", { points: s.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
    fill: "none", stroke: "#1f6feb", "stroke-width": "2" }));
  s.forEach((v, i) => svg.append(svgEl("circle", { cx: x(i), cy: y(v), r: 2.5, fill: "#1f6feb" })));
  svg.append(svgEl("text", { x: left, y: 16, "font-size": "12" }, `${curve.document} — score per sentence`));
  return svg;
}

function passageItem(r, top) {
  const text = el("p", { class: "passage-text" }, ...r.sentences.map((x) => el("span", {
    class: top.has(x) ? "sentence hit" : "sentence", title: `score ${x.score.toFixed(3)}`, text: x.text + " " })));
  const parts = [el("div", { class: "title", text: `${r.document}${r.aspect ? " — " + r.aspect : ""}` }),
    el("span", { class: "score", text: `score ${r.score.toFixed(3)}` }), text];
  if (r.text.length > SHORT_CHARS) {
    text.classList.add("clamped");
    const more = el("button", { type: "button", class: "secondary more", "aria-expanded": "false", text: "Show more" });
    more.addEventListener("click", () => {
      const open = text.classList.toggle("clamped") === false;
      more.textContent = open ? "Show less" : "Show more";
      more.setAttribute("aria-expanded", String(open));
    });
    parts.push(more);
  }
  return el("li", {}, ...parts);
}

$("passages-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const entity = $("entity").value.trim(), aspect = $("aspect").value.trim();
  // the previous answer goes at once: a failure (or a form left half filled) must not leave it on screen as if it
  // were this one's
  $("passages").replaceChildren();
  $("curve").replaceChildren();
  $("passages-meta").textContent = "";
  if (!entity || !aspect) { showError(clinician, "Give both an entity and an aspect."); return; }
  busy(clinician, "Searching the passages…", async () => {
    const data = await api("/passages", { entity, aspect, k: 5 });
    const top = new Set(data.results.flatMap((r) => r.sentences).sort((a, b) => b.score - a.score).slice(0, HIGHLIGHTED));
    $("passages").replaceChildren(...data.results.map((r) => passageItem(r, top)));
    $("curve").replaceChildren(...(data.curve ? [curveSvg(data.curve, $("curve").clientWidth)] : []));
    $("passages-meta").textContent = data.results.length ? `${modelLine(data)} · ${data.sentence_scores}` : "No passage found.";
  });
});

// -- coder ------------------------------------------------------------------------------------------
const coder = $("coder");

$("normalize-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const mention = $("mention").value.trim();
  $("codes").hidden = true;
  $("normalize-meta").textContent = "";
  $("normalize-warn").hidden = true;
  if (!mention) { showError(coder, "Type a procedure."); return; }
  busy(coder, "Normalizing…", async () => {
    const data = await api("/normalize", { mention, k: 5 });
    const body = document.querySelector("#codes tbody");
    body.replaceChildren(...data.results.map((r, i) => el("tr", {}, el("td", { text: String(i + 1) }),
      el("td", { lang: "zh", text: r.name }), el("td", { class: "codes", text: r.codes.join(", ") }),
      el("td", { text: r.score.toFixed(3) }))));
    $("codes").hidden = false;
    const picked = data.predicted ? ` · selected: ${data.predicted.join(" + ")}` : "";
    $("normalize-meta").textContent = `${data.kb} · ${modelLine(data)}${picked}`;
    if (data.low_confidence) {
      $("normalize-warn").textContent = `Low confidence (${data.confidence.toFixed(2)}): the model thinks the selected ` +
        "name is more likely wrong than right. Is this a procedure? Check the candidates.";
      $("normalize-warn").hidden = false;
    }
  });
});

// each pipeline's state: the page is usable as soon as one is ready, and says what is still being built
function showHealth() {
  api("/health").then((h) => {
    const states = Object.entries(h.states || {});
    $("models").textContent = "pipelines: " + (states.length ? states : Object.entries(h.pipelines).map(([k, v]) => [k, v ? "ready" : "not served"]))
      .map(([k, v]) => `${k} ${v === "ready" ? "✓" : "— " + v}`).join(" · ");
    if (!h.ready) setTimeout(showHealth, 5000);
  }).catch((e) => {
    $("models").textContent = e.message;
  });
}
showHealth();
