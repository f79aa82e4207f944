// medrank web page: plain JS, no external resources (the service runs offline).
"use strict";

const $ = (id) => document.getElementById(id);
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

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, body) {
  showError("");
  const headers = { "Content-Type": "application/json" };
  const token = $("token").value.trim();
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(path, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const detail = Array.isArray(data.detail) ? data.detail.map((d) => d.msg).join("; ") : data.detail;
    const err = new Error(`${res.status}: ${detail || res.statusText}`);
    showError(err.message);
    throw err;
  }
  return data;
}

async function busy(button, fn) {
  button.disabled = true;
  try { await fn(); } catch (e) { /* shown in the error box */ } finally { button.disabled = false; }
}

function modelLine(data) {
  return `served by ${data.model}${data.trained ? "" : " — not trained"}`;
}

// -- tabs -------------------------------------------------------------------------------------------
for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => {
    for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t === tab);
    for (const p of document.querySelectorAll(".panel")) p.hidden = p.id !== tab.dataset.panel;
    showError("");
  });
}
$("token").value = sessionStorage.getItem("medrank-token") || "";
$("token").addEventListener("change", () => sessionStorage.setItem("medrank-token", $("token").value));

// -- patient flow -----------------------------------------------------------------------------------
$("complaint-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("complaint").value.trim();
  if (!text) { showError("Please describe what brings you here."); return; }
  busy($("detect"), async () => {
    const data = await api("/symptoms", { query: text, k: 5 });
    state.complaint = text;
    state.dialogue = [{ speaker: "patient", text }];
    const list = $("symptoms");
    list.replaceChildren();
    data.results.forEach((r, i) => {
      const box = el("input", { type: "checkbox", id: `sym-${i}`, value: r.name });
      if (i < 2) box.checked = true;
      list.append(el("li", {}, box, " ", el("label", { for: `sym-${i}`, text: r.name }),
        el("span", { class: "score", text: `${r.id} · ${r.score.toFixed(3)}` })));
    });
    $("symptoms-meta").textContent = `${data.kb} (${data.language}) · ${modelLine(data)}`;
    $("symptoms-block").hidden = false;
    $("questions-block").hidden = true;
    $("similar-block").hidden = true;
  });
});

$("confirm").addEventListener("click", () => {
  state.symptoms = [...document.querySelectorAll("#symptoms input:checked")].map((b) => b.value);
  busy($("confirm"), async () => {
    await Promise.all([rankQuestions(), findSimilar()]);
  });
});

function renderDialogue() {
  $("dialogue").replaceChildren(...state.dialogue.map((t) => el("li", { class: t.speaker, text: t.text })));
}

async function rankQuestions() {
  const data = await api("/next-questions", { dialogue: state.dialogue, symptoms: state.symptoms, k: 5 });
  const list = $("questions");
  list.replaceChildren();
  data.results.forEach((q, i) => {
    const input = el("input", { id: `answer-${i}`, placeholder: "your answer", maxlength: "2000" });
    const button = el("button", { type: "button", class: "secondary", text: "Answer" });
    const li = el("li", {}, el("span", { class: "question", text: q.text }), el("span", { class: "score", text: q.score.toFixed(3) }),
      el("div", { class: "answer" }, input, button));
    button.addEventListener("click", () => {
      const answer = input.value.trim();
      if (!answer) { showError("Type an answer first."); return; }
      state.dialogue.push({ speaker: "doctor", text: q.text }, { speaker: "patient", text: answer });
      busy(button, rankQuestions);
    });
    list.append(li);
  });
  $("questions-meta").textContent = `${data.retrieval} · ${modelLine(data)}`;
  renderDialogue();
  $("questions-block").hidden = false;
}

async function findSimilar() {
  const data = await api("/similar-questions", { question: state.complaint, k: 5 });
  $("similar").replaceChildren(...data.results.map((r) => el("li", {}, el("span", { text: r.text }),
    el("span", { class: "score", text: r.match_score === null ? `bm25 ${r.recall_score.toFixed(2)}` : `match ${r.match_score.toFixed(3)}` }))));
  $("similar-meta").textContent = `${data.recall} · ${modelLine(data)}`;
  $("similar-block").hidden = false;
}

// -- clinician --------------------------------------------------------------------------------------
function heat(score, lo, hi) {
  // cubic: only the sentences near the top score stand out
  const t = hi > lo ? (score - lo) / (hi - lo) : 0;
  return `rgba(255, 196, 0, ${(0.04 + 0.7 * t * t * t).toFixed(2)})`;
}

function curveSvg(curve) {
  const ns = "http://www.w3.org/2000/svg";
  const w = 800, h = 160, pad = 18;
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
  if (!entity || !aspect) { showError("Give both an entity and an aspect."); return; }
  busy($("ask"), async () => {
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
    $("curve").replaceChildren(...(data.curve ? [curveSvg(data.curve)] : []));
    $("passages-meta").textContent = data.results.length ? `${modelLine(data)} · ${data.sentence_scores}` : "No passage found.";
  });
});

// -- coder ------------------------------------------------------------------------------------------
$("normalize-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const mention = $("mention").value.trim();
  if (!mention) { showError("Type a procedure."); return; }
  busy($("code"), async () => {
    const data = await api("/normalize", { mention, k: 5 });
    const body = document.querySelector("#codes tbody");
    body.replaceChildren(...data.results.map((r, i) => el("tr", {}, el("td", { text: String(i + 1) }), el("td", { text: r.name }),
      el("td", { class: "codes", text: r.codes.join(", ") }), el("td", { text: r.score.toFixed(3) }))));
    $("codes").hidden = false;
    const picked = data.predicted ? ` · selected: ${data.predicted.join(" + ")}` : "";
    $("normalize-meta").textContent = `${data.kb} · ${modelLine(data)}${picked}`;
  });
});

api("/health").then((h) => {
  $("models").textContent = "pipelines: " + Object.entries(h.pipelines).map(([k, v]) => `${k} ${v ? "✓" : "✗"}`).join(" · ");
}).catch(() => {});
