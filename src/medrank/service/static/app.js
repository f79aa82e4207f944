// medrank web page: plain JS, no external resources (the service runs offline).
"use strict";

const $ = (id) => document.getElementById(id);
// The server accepts at most 50 dialogue turns and 64 KiB per request (settings.max_body_bytes); the
// re-ranker reads a dialogue from its end, so the page sends the most recent turns that fit.
const MAX_TURNS = 50;
const MAX_DIALOGUE_BYTES = 48 * 1024;
const state = { complaint: "", symptoms: [], dialogue: [] };

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
    const detail = data && data.detail;
    throw new Error(`${res.status}: ${detail || res.statusText || "request failed"}`);
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
  for (const id of ["symptoms-block", "questions-block", "similar-block"]) $(id).hidden = true;
  busy(patient, "Looking up symptoms…", async () => {
    const data = await api("/symptoms", { query: text, k: 5 });
    state.complaint = text;
    state.symptoms = [];
    state.dialogue = [{ speaker: "patient", text }];
    const list = $("symptoms");
    list.replaceChildren();
    data.results.forEach((r, i) => {
      const box = el("input", { type: "checkbox", id: `sym-${i}`, value: r.name });
      list.append(el("li", {}, box, " ", el("label", { for: `sym-${i}`, lang: data.language, text: r.name }),
        el("span", { class: "score", text: r.id === r.name ? r.score.toFixed(3) : `${r.id} · ${r.score.toFixed(3)}` })));
    });
    $("symptoms-meta").textContent = `${data.kb} (${data.language}) · ${modelLine(data)}`;
    $("symptoms-block").hidden = false;
    $("questions-block").hidden = true;
    $("similar-block").hidden = true;
    $("symptoms-title").focus();
  });
});

$("confirm").addEventListener("click", () => {
  state.symptoms = [...document.querySelectorAll("#symptoms input:checked")].map((b) => b.value);
  busy(patient, "Finding questions and similar questions…", async () => {
    // both requests end before the buttons come back; the first failure is the one shown
    const failed = (await Promise.allSettled([rankQuestions(state.dialogue), findSimilar()])).find((r) => r.status === "rejected");
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

// Ranks the next questions for `dialogue`; the conversation is updated only once the server answered.
async function rankQuestions(dialogue) {
  const sent = dialogueToSend(dialogue);
  const data = await api("/next-questions", { dialogue: sent, symptoms: state.symptoms, k: 5 });
  state.dialogue = dialogue;
  const list = $("questions");
  list.replaceChildren();
  data.results.forEach((q, i) => {
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
        await rankQuestions(next);
        $("questions-title").focus();
      });
    });
    list.append(el("li", {}, el("span", { class: "question", lang: data.language, text: q.text }),
      el("span", { class: "score", text: q.score.toFixed(3) }), form));
  });
  $("questions-meta").textContent = `${data.retrieval} · ${modelLine(data)}`;
  renderDialogue(sent.length);
  $("questions-block").hidden = false;
}

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
  $("similar").replaceChildren(...data.results.map((r) => el("li", {}, el("span", { lang: data.language, text: r.text }),
    el("span", { class: "score", text: r.match_score === null ? `bm25 ${r.recall_score.toFixed(2)}` : `match ${r.match_score.toFixed(3)}` }),
    ...(r.answer ? [answerBlock(r, data.language)] : []))));
  $("similar-meta").textContent = `${data.recall} · ${modelLine(data)}`;
  $("similar-block").hidden = false;
}

// -- clinician --------------------------------------------------------------------------------------
const clinician = $("clinician");

function heat(score, lo, hi) {
  // cubic: only the sentences near the top score stand out
  const t = hi > lo ? (score - lo) / (hi - lo) : 0;
  return `rgba(255, 196, 0, ${(0.04 + 0.7 * t * t * t).toFixed(2)})`;
}

function curveSvg(curve, width) {
  const ns = "http://www.w3.org/2000/svg";
  // drawn at the box's own width, so labels keep their size on a phone
  const w = Math.max(280, Math.round(width || 800)), h = 160, pad = 18;
  const s = curve.scores;
  const lo = Math.min(...s), hi = Math.max(...s);
  const x = (i) => pad + (s.length > 1 ? (i * (w - 2 * pad)) / (s.length - 1) : (w - 2 * pad) / 2);
  const y = (v) => h - pad - (hi > lo ? ((v - lo) * (h - 2 * pad)) / (hi - lo) : (h - 2 * pad) / 2);
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `sentence score curve of ${curve.document}`);
  const best = curve.passages.reduce((a, b) => (b.score > (a ? a.score : -Infinity) ? b : a), null);
  curve.passages.forEach((p, k) => {
    const r = document.createElementNS(ns, "rect");
    const x0 = x(p.start) - (s.length > 1 ? (w - 2 * pad) / (2 * (s.length - 1)) : 0);
    const x1 = x(Math.max(p.start, p.end - 1)) + (s.length > 1 ? (w - 2 * pad) / (2 * (s.length - 1)) : 0);
    r.setAttribute("x", x0); r.setAttribute("y", pad / 2); r.setAttribute("width", Math.max(1, x1 - x0)); r.setAttribute("height", h - pad);
    r.setAttribute("fill", p === best ? "#c6f6d5" : (k % 2 ? "#f3f4f6" : "#e5e7eb"));
    const title = document.createElementNS(ns, "title");
    title.textContent = `${p.aspect || ""} ${p.score.toFixed(3)}`;
    r.append(title);
    svg.append(r);
  });
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", s.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" "));
  line.setAttribute("fill", "none"); line.setAttribute("stroke", "#1f6feb"); line.setAttribute("stroke-width", "2");
  svg.append(line);
  s.forEach((v, i) => {
    const c = document.createElementNS(ns, "circle");
    c.setAttribute("cx", x(i)); c.setAttribute("cy", y(v)); c.setAttribute("r", 2.5); c.setAttribute("fill", "#1f6feb");
    svg.append(c);
  });
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", pad); label.setAttribute("y", 14); label.setAttribute("font-size", "12");
  label.textContent = `${curve.document} — score per sentence`;
  svg.append(label);
  return svg;
}

$("passages-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const entity = $("entity").value.trim(), aspect = $("aspect").value.trim();
  if (!entity || !aspect) { showError(clinician, "Give both an entity and an aspect."); return; }
  // the previous answer goes at once: a failure must not leave it on screen as if it were this one's
  $("passages").replaceChildren();
  $("curve").replaceChildren();
  $("passages-meta").textContent = "";
  busy(clinician, "Searching the passages…", async () => {
    const data = await api("/passages", { entity, aspect, k: 5 });
    const all = data.results.flatMap((r) => r.sentences.map((x) => x.score));
    const lo = Math.min(...all), hi = Math.max(...all);
    $("passages").replaceChildren(...data.results.map((r) => el("li", {},
      el("div", { class: "title", text: `${r.document}${r.aspect ? " — " + r.aspect : ""}` }),
      el("span", { class: "score", text: `score ${r.score.toFixed(3)}` }),
      el("p", {}, ...r.sentences.map((x) => {
        const span = el("span", { class: "sentence", title: x.score.toFixed(3), text: x.text + " " });
        span.style.background = heat(x.score, lo, hi);
        return span;
      })))));
    $("curve").replaceChildren(...(data.curve ? [curveSvg(data.curve, $("curve").clientWidth)] : []));
    $("passages-meta").textContent = data.results.length ? `${modelLine(data)} · ${data.sentence_scores}` : "No passage found.";
  });
});

// -- coder ------------------------------------------------------------------------------------------
const coder = $("coder");

$("normalize-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const mention = $("mention").value.trim();
  if (!mention) { showError(coder, "Type a procedure."); return; }
  $("codes").hidden = true;
  $("normalize-meta").textContent = "";
  $("normalize-warn").hidden = true;
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

api("/health").then((h) => {
  $("models").textContent = "pipelines: " + Object.entries(h.pipelines).map(([k, v]) => `${k} ${v ? "✓" : "✗"}`).join(" · ");
}).catch((e) => {
  $("models").textContent = e.message;
});
