// distill view: the page of a stage directory or a recipe run (reasonkit/view/). Model text is untrusted: every
// string from the data goes into the page as a text node (el(), textContent) or through KaTeX with trust off;
// nothing from the data is ever parsed as HTML, and no link it holds is followed.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("rk-data").textContent);
  const MAIN = document.getElementById("main");
  const NAV = document.getElementById("nav");
  const PAGE = 50;                 // rows per page of a table
  const MATH_MAX = 200000;         // a text longer than this is shown without math typesetting (one line of 1 MB stays cheap)
  const PREVIEW = 160;             // characters of a row's text shown in its closed card
  const SECTIONS = {};
  DATA.sections.forEach((s) => { SECTIONS[s.name] = s; });
  let mathOn = true;

  // ---- building the DOM without HTML -------------------------------------------------------------------------
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "href") e.setAttribute("href", String(v).startsWith("#") ? v : "#");  // links go within the page
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    append(e, kids);
    return e;
  }
  function append(e, kids) {
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.append(kid instanceof Node ? kid : String(kid));  // a string becomes a text node, never markup
    }
    return e;
  }
  const fmt = (n) => (typeof n === "number" ? (Number.isInteger(n) ? n.toLocaleString("en") : (Math.abs(n) < 1e-3 && n !== 0 ? n.toExponential(2) : n.toFixed(4).replace(/0+$/, "").replace(/\.$/, ""))) : (n === null || n === undefined ? "-" : String(n)));
  const short = (s, n) => { s = s === null || s === undefined ? "" : String(s); return s.length > n ? s.slice(0, n) + "..." : s; };
  const link = (params, text, cls) => el("a", { href: "#" + encode(params), class: cls }, text);

  // ---- state in the address: #s=verified&reason=wrong&prompt=aime-1 (back and forward work, a view can be shared)
  function encode(params) {
    return Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined)
      .map(([k, v]) => encodeURIComponent(k) + "=" + encodeURIComponent(v)).join("&");
  }
  function state() {
    const out = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      if (!part) continue;
      const i = part.indexOf("=");
      out[decodeURIComponent(i < 0 ? part : part.slice(0, i))] = i < 0 ? "" : decodeURIComponent(part.slice(i + 1));
    }
    return out;
  }
  function go(params) { location.hash = encode(params); }
  function update(changes) { const s = Object.assign(state(), changes); if (!("page" in changes)) delete s.page; go(s); }

  // ---- text, with its math typeset by KaTeX (trust off: \href, \url and friends render as text) --------------
  const MATH = /(\$\$[\s\S]+?\$\$|\\\[[\s\S]+?\\\]|\\\([\s\S]+?\\\)|\$(?=\S)[^$\n]+?(?<=\S)\$(?!\d)|\\boxed\{(?:[^{}]|\{[^{}]*\})*\})/g;
  function typeset(target, text) {
    if (!mathOn || typeof katex === "undefined" || text.length > MATH_MAX || !/[$\\]/.test(text)) {
      target.textContent = text;
      return target;
    }
    let last = 0;
    for (const m of text.matchAll(MATH)) {
      target.append(text.slice(last, m.index));
      const raw = m[0];
      let tex = raw, display = false;
      if (raw.startsWith("$$")) { tex = raw.slice(2, -2); display = true; }
      else if (raw.startsWith("\\[")) { tex = raw.slice(2, -2); display = true; }
      else if (raw.startsWith("\\(")) tex = raw.slice(2, -2);
      else if (raw.startsWith("$")) tex = raw.slice(1, -1);
      const span = el("span", { class: "katex-inline", title: raw });
      try {
        katex.render(tex, span, { throwOnError: false, trust: false, displayMode: display, maxSize: 20, maxExpand: 200, strict: "ignore" });
      } catch (e) { span.textContent = raw; }
      target.append(span);
      last = m.index + raw.length;
    }
    target.append(text.slice(last));
    return target;
  }
  function textBlock(text, cls) { return typeset(el("div", { class: "text" + (cls ? " " + cls : "") }), text === null || text === undefined ? "" : String(text)); }
  function splitThink(text) {  // an assistant turn written as <think>...</think>answer
    text = text || "";
    const open = text.indexOf("<think>"), close = text.indexOf("</think>");
    if (close < 0) return { think: null, rest: text };
    const start = open >= 0 && open < close ? open + 7 : 0;
    return { think: text.slice(start, close).replace(/^\n/, "").replace(/\n$/, ""), rest: text.slice(close + 8).replace(/^\n+/, "") };
  }
  function thinkBlock(think) {
    if (think === null || think === undefined) return null;
    const d = el("details", { class: "think" }, el("summary", {}, `think (${think.length.toLocaleString("en")} characters, folded)`));
    let filled = false;  // typeset on first opening: a page of closed cards costs nothing
    d.addEventListener("toggle", () => { if (d.open && !filled) { filled = true; d.append(textBlock(think, "think-text")); } });
    return d;
  }
  function assistantText(text) { const p = splitThink(text); return [thinkBlock(p.think), p.think !== null && !p.rest ? null : textBlock(p.rest)]; }
  function messagesBlock(messages) {
    const out = [];
    for (const m of messages || []) {
      const role = m.role || "?";
      out.push(el("div", { class: "label" }, role + (m.name ? " (" + m.name + ")" : "")));
      if (role === "assistant") out.push(assistantText(m.content));
      else out.push(textBlock(m.content, "role-" + role));
      for (const call of m.tool_calls || []) {
        out.push(el("div", { class: "call" }, el("span", { class: "badge" }, "call " + (call.name || "?")), textBlock(call.arguments)));
      }
    }
    return out;
  }
  function facts(pairs) {
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of pairs) if (v !== undefined) dl.append(el("dt", {}, k), el("dd", {}, v instanceof Node ? v : fmt(v)));
    return dl;
  }

  // ---- rows of a table: filtered here (embedded) or by the server (distill view --serve) -------------------
  const lowered = {};  // table key -> each row's text, lowercased, for the search (built on the first search)
  function rowObject(table, row) { const o = {}; table.columns.forEach((c, i) => { o[c] = row[i]; }); return o; }
  function searchText(table, i) {
    const cache = lowered[table.key] || (lowered[table.key] = []);
    if (cache[i] === undefined) {
      const parts = [];
      const walk = (v) => { if (v === null || v === undefined) return; if (typeof v === "object") Object.values(v).forEach(walk); else parts.push(String(v)); };
      walk(table.rows[i]);
      cache[i] = parts.join("\n").toLowerCase();
    }
    return cache[i];
  }
  function matches(table, i, f) {
    const row = table.rows[i], col = (name) => row[table.columns.indexOf(name)];
    const has = (name) => table.columns.indexOf(name) >= 0;
    if (f.reason) {
      const r = has("drop_reason") ? col("drop_reason") : null;
      if (f.reason === "(kept)" ? r !== null && r !== undefined : f.reason === "(dropped)" ? !r : r !== f.reason) return false;
    }
    if (f.verdict && has("correct")) {
      const c = col("correct");
      if ((f.verdict === "correct" && c !== true) || (f.verdict === "wrong" && c !== false) || (f.verdict === "unknown" && c !== null && c !== undefined)) return false;
    }
    if (f.source && has("source") && col("source") !== f.source) return false;
    if (f.step && has("step") && String(col("step")) !== f.step) return false;
    if (f.prompt) {
      const id = String(col("id") ?? "");
      if (id !== f.prompt && !(f.prompt.length > 2 && id.toLowerCase().includes(f.prompt.toLowerCase()))) return false;
    }
    if ((f.minlen || f.maxlen) && has("completion_tokens")) {
      const n = col("completion_tokens");
      if (f.minlen && !(n >= +f.minlen)) return false;
      if (f.maxlen && !(n <= +f.maxlen)) return false;
    }
    if (f.q && !searchText(table, i).includes(f.q.toLowerCase())) return false;
    return true;
  }
  const FILTER_KEYS = ["reason", "verdict", "source", "step", "prompt", "minlen", "maxlen", "q"];
  function filtersOf(s) { const f = {}; FILTER_KEYS.forEach((k) => { if (s[k]) f[k] = s[k]; }); return f; }
  function rowsPage(table, f, page) {
    if (table.remote) {
      const q = encode(Object.assign({ table: table.key, offset: page * PAGE, limit: PAGE }, f));
      return fetch("api/rows?" + q).then((r) => r.json()).then((r) => {
        if (r.error) throw new Error(r.error);
        table.columns = r.columns;
        return { rows: r.rows.map((row) => rowObject(table, row)), matching: r.matching, offset: page * PAGE };
      });
    }
    const hits = [];
    for (let i = 0; i < table.rows.length; i++) if (matches(table, i, f)) hits.push(i);
    const slice = hits.slice(page * PAGE, page * PAGE + PAGE).map((i) => rowObject(table, table.rows[i]));
    return Promise.resolve({ rows: slice, matching: hits.length, offset: page * PAGE });
  }

  // ---- one row, by kind of table ---------------------------------------------------------------------------
  const SHOWN = new Set(["id", "sample", "messages", "completion", "reasoning", "response", "pred", "answer", "correct", "keep",
    "drop_reason", "verify_reason", "finish_reason", "prompt_tokens", "completion_tokens", "teacher", "gen_config", "source",
    "lang_ratio", "prompt", "chosen", "rejected", "chosen_score", "rejected_score", "strategy", "step", "reward", "advantage",
    "turns", "tool_calls", "tool_errors", "tools", "init_response", "critic_response", "revision_response", "principle",
    "critic_prompt", "revision_prompt", "rounds", "reason", "completions", "labels", "soft", "problem"]);
  function verdictBadge(r) {
    if (r.drop_reason) return el("span", { class: "badge bad", title: "dropped by the filter" }, "dropped: " + r.drop_reason);
    if (r.keep === true) return el("span", { class: "badge ok" }, "kept");
    if (r.correct === true) return el("span", { class: "badge ok" }, "correct");
    if (r.correct === false) return el("span", { class: "badge bad" }, "wrong");
    if ("correct" in r) return el("span", { class: "badge warn" }, "unverified");
    return null;
  }
  function cardHead(table, r) {
    const bits = [el("span", { class: "id" }, r.id === undefined ? "" : String(r.id)), r.sample !== undefined && r.sample !== null ? el("span", { class: "muted" }, "#" + r.sample) : null];
    if (r.step !== undefined) bits.push(el("span", { class: "badge" }, "step " + r.step));
    bits.push(verdictBadge(r));
    if (r.reward !== undefined && r.reward !== null) bits.push(el("span", { class: "badge" }, "reward " + fmt(r.reward)));
    if (r.advantage !== undefined && r.advantage !== null) bits.push(el("span", { class: "badge" }, "adv " + fmt(r.advantage)));
    if (r.chosen_score !== undefined) bits.push(el("span", { class: "badge" }, "scores " + fmt(r.chosen_score) + " | " + fmt(r.rejected_score)));
    if (r.completion_tokens !== undefined) bits.push(el("span", { class: "muted" }, fmt(r.completion_tokens) + " tok"));
    if (r.finish_reason && r.finish_reason !== "stop") bits.push(el("span", { class: "badge warn" }, r.finish_reason));
    bits.push(el("span", { class: "preview" }, short(previewOf(table, r), PREVIEW)));
    return bits;
  }
  function previewOf(table, r) {
    if (r.response !== undefined) return r.response;
    if (r.revision_response !== undefined) return r.revision_response;
    const last = (ms) => (Array.isArray(ms) && ms.length ? ms[ms.length - 1].content : ms);
    const answer = (turn) => splitThink(String(last(turn) ?? "")).rest;
    if (r.chosen !== undefined) return "chosen: " + answer(r.chosen) + "  |  rejected: " + answer(r.rejected);
    if (r.messages !== undefined) return last(r.messages);
    if (r.prompt !== undefined) return typeof r.prompt === "string" ? r.prompt : last(r.prompt);
    return Object.values(r).filter((v) => typeof v === "string").join(" | ");
  }
  function genConfig(fp) {
    const c = DATA.gen_configs[fp];
    if (!c) return fp;
    return el("details", {}, el("summary", {}, fp), facts(Object.entries(c)));
  }
  function traceBody(r) {
    const out = [];
    if (r.messages) out.push(el("div", { class: "label" }, "prompt"), messagesBlock(r.messages.filter((m) => m.role !== "assistant")));
    if (r.reasoning !== undefined && r.reasoning !== null) out.push(thinkBlock(r.reasoning));
    if (r.response !== undefined) out.push(el("div", { class: "label" }, "response"), textBlock(r.response));
    if (r.completion) out.push(el("div", { class: "label" }, "completion (no think split)"), assistantText(r.completion));
    const verdict = r.correct === true ? "correct" : r.correct === false ? "wrong" : ("correct" in r ? "unknown (could not verify)" : undefined);
    const pairs = [["extracted answer", r.pred], ["gold answer", r.answer], ["verdict", verdict], ["kept", r.keep], ["drop reason", r.drop_reason],
      ["why (verifier)", r.verify_reason], ["language ratio", r.lang_ratio], ["finish reason", r.finish_reason],
      ["tokens (prompt / completion)", r.prompt_tokens !== undefined ? fmt(r.prompt_tokens) + " / " + fmt(r.completion_tokens) : undefined],
      ["step", r.step], ["reward", r.reward]];
    for (const [k, v] of Object.entries(r)) if (k.startsWith("reward_")) pairs.push([k.slice(7) + " reward", v]);
    pairs.push(["advantage", r.advantage], ["source", r.source], ["teacher", r.teacher], ["generation config", r.gen_config ? genConfig(r.gen_config) : undefined]);
    out.push(facts(pairs.filter(([, v]) => v !== undefined && v !== null)), otherColumns(r));
    return out;
  }
  function otherColumns(r) {
    const rest = Object.entries(r).filter(([k, v]) => !SHOWN.has(k) && !k.startsWith("reward_") && v !== null && v !== undefined);
    if (!rest.length) return null;
    return el("details", {}, el("summary", { class: "muted" }, "other columns (" + rest.length + ")"),
      facts(rest.map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : v])));
  }
  function pairBody(r) {
    const sideOf = (title, turn, score) => el("div", {}, el("h4", {}, title + (score !== undefined && score !== null ? " (score " + fmt(score) + ")" : "")),
      typeof turn === "string" ? assistantText(turn) : messagesBlock(turn));
    return [el("div", { class: "label" }, "prompt"), typeof r.prompt === "string" ? textBlock(r.prompt) : messagesBlock(r.prompt),
      el("div", { class: "side" }, sideOf("chosen", r.chosen, r.chosen_score), sideOf("rejected", r.rejected, r.rejected_score)),
      facts([["strategy", r.strategy], ["principle", r.principle], ["chosen sample", r.chosen_sample], ["rejected sample", r.rejected_sample]].filter(([, v]) => v !== undefined && v !== null)),
      otherColumns(r)];
  }
  function critiqueBody(r) {
    return [el("div", { class: "label" }, "prompt"), r.prompt ? messagesBlock(r.prompt) : textBlock(r.init_prompt),
      facts([["principle", r.principle], ["rounds", (r.rounds || []).length], ["failed", r.reason]].filter(([, v]) => v !== undefined && v !== null)),
      el("div", { class: "label" }, "critique"), textBlock(r.critic_response),
      el("div", { class: "side" }, el("div", {}, el("h4", {}, "initial response"), assistantText(r.init_response)),
        el("div", {}, el("h4", {}, "revision"), assistantText(r.revision_response))), otherColumns(r)];
  }
  function stepsBody(r) {
    const rows = (r.completions || []).map((c, i) => el("tr", {}, el("td", { class: "num" }, i + 1),
      el("td", {}, el("span", { class: "badge " + (r.labels && r.labels[i] ? "ok" : "bad") }, r.labels && r.labels[i] ? "good" : "bad")),
      el("td", { class: "num" }, fmt(r.soft ? r.soft[i] : null)), el("td", {}, textBlock(c))));
    return [el("div", { class: "label" }, "prompt"), textBlock(r.prompt),
      el("table", { class: "grid" }, el("tr", {}, el("th", {}, "step"), el("th", {}, "label"), el("th", {}, "soft"), el("th", {}, "text")), rows)];
  }
  function bodyOf(view, r) {
    if (view === "pair") return pairBody(r);
    if (view === "critique") return critiqueBody(r);
    if (view === "steps") return stepsBody(r);
    if (view === "trajectory") {
      return [messagesBlock(r.messages), facts([["turns", r.turns], ["tool calls", r.tool_calls], ["tool errors", r.tool_errors],
        ["answer", r.response], ["gold answer", r.answer], ["verdict", r.correct], ["drop reason", r.drop_reason], ["finish reason", r.finish_reason]]
        .filter(([, v]) => v !== undefined && v !== null)), otherColumns(r)];
    }
    if (view === "messages" || view === "prompt") return [messagesBlock(r.messages), facts([["answer", r.answer], ["source", r.source]].filter(([, v]) => v !== undefined && v !== null)), otherColumns(r)];
    if (view === "rows") return [facts(Object.entries(r).map(([k, v]) => [k, typeof v === "object" && v !== null ? JSON.stringify(v) : v]))];
    return traceBody(r);
  }
  function card(table, r, open) {
    const body = el("div", { class: "body" });
    const c = el("div", { class: "card", "data-id": r.id }, el("div", { class: "head", role: "button", tabindex: "0" }, cardHead(table, r)), body);
    body.hidden = true;
    const toggle = () => {
      if (body.hidden && !body.childNodes.length) append(body, [bodyOf(table.view, r),
        r.id !== undefined ? el("div", { class: "muted" }, link(Object.assign(state(), { prompt: r.id, page: "" }), "every row of prompt " + r.id)) : null]);
      body.hidden = !body.hidden;
    };
    c.firstChild.addEventListener("click", toggle);
    c.firstChild.addEventListener("keydown", (e) => { if (e.key === "Enter") toggle(); });
    if (open) toggle();
    return c;
  }

  // ---- a table with its filters ------------------------------------------------------------------------------
  function filterBar(table, s) {
    const f = filtersOf(s);
    const field = (label, input) => el("label", {}, label, input);
    const select = (key, options) => {
      const sel = el("select", { "data-filter": key, onchange: (e) => update({ [key]: e.target.value }) });
      for (const [value, text] of options) sel.append(el("option", { value }, text));
      sel.value = f[key] || "";
      return sel;
    };
    const input = (key, type, placeholder) => {
      const i = el("input", { type, "data-filter": key, placeholder, value: f[key] || "", class: key === "q" ? "search" : null });
      i.addEventListener("change", () => update({ [key]: i.value.trim() }));
      return i;
    };
    const bar = el("div", { class: "filters" });
    const reasons = Object.entries(table.reasons || {});
    if (table.columns.indexOf("drop_reason") >= 0 || reasons.length) {
      bar.append(field("reason", select("reason", [["", "any"], ["(kept)", "kept"], ["(dropped)", "dropped, any reason"],
        ...reasons.map(([r, c]) => [r, r + " (" + fmt(c.total) + ")"])])));
    }
    if (table.columns.indexOf("correct") >= 0) bar.append(field("verdict", select("verdict", [["", "any"], ["correct", "correct"], ["wrong", "wrong"], ["unknown", "unknown"]])));
    if ((table.sources || []).length > 1) bar.append(field("source", select("source", [["", "any"], ...table.sources.map((x) => [x, x])])));
    if (table.view === "rollout" && table.steps) bar.append(field("step", select("step", [["", "any"], ...table.steps.map((x) => [String(x), String(x)])])));
    bar.append(field("prompt (id)", input("prompt", "text", "id")));
    if (table.columns.indexOf("completion_tokens") >= 0) bar.append(field("tokens at least", input("minlen", "number", "")), field("at most", input("maxlen", "number", "")));
    bar.append(field("search the text", input("q", "search", "words, a number...")));
    bar.append(el("button", { type: "button", onclick: () => { const keep = {}; ["s", "a", "b"].forEach((k) => { if (s[k]) keep[k] = s[k]; }); go(keep); } }, "clear"));
    return bar;
  }
  function sampleNote(table) {
    if (table.remote) return el("p", { class: "muted" }, `All ${fmt(table.total)} rows, read from the Parquet shards page by page (distill view --serve).`);
    const n = table.note;
    if (!n || n.shown === n.total) return el("p", { class: "muted" }, `All ${fmt(table.total)} rows.`);
    const parts = Object.entries(n.reasons).map(([r, c]) => `${fmt(c.shown)} of ${fmt(c.total)} ${r}`);
    return el("p", { class: "note" }, `A sample: ${fmt(n.shown)} of ${fmt(n.total)} rows on this page` + (parts.length ? ` (dropped rows, by reason: ${parts.join(", ")}; each reason's rows taken as whole prompts)` : "") +
      `, the rest drawn at random by whole prompts. distill view --rows ${fmt(n.total)} puts every row on the page; --serve reads them on demand.`);
  }
  function tableView(container, table, s) {
    container.append(sampleNote(table), filterBar(table, s));
    const list = el("div", { class: "rows" }, el("p", { class: "muted" }, "..."));
    container.append(list);
    const page = Math.max(0, parseInt(s.page || "0", 10) || 0);
    return rowsPage(table, filtersOf(s), page).then((got) => {
      list.textContent = "";
      const last = Math.max(0, Math.ceil(got.matching / PAGE) - 1);
      const pager = () => el("div", { class: "pager" },
        el("button", { type: "button", disabled: page <= 0 ? "disabled" : null, onclick: () => update({ page: String(page - 1) }) }, "previous"),
        el("span", { class: "count" }, got.matching ? `rows ${fmt(got.offset + 1)}-${fmt(got.offset + got.rows.length)} of ${fmt(got.matching)} matching` : "no row matches these filters"),
        el("button", { type: "button", disabled: page >= last ? "disabled" : null, onclick: () => update({ page: String(page + 1) }) }, "next"));
      list.append(pager());
      let group = null;
      for (const r of got.rows) {
        const key = table.view === "rollout" ? r.step + "/" + r.id : null;
        if (key && key !== group) { group = key; list.append(el("h3", {}, `step ${r.step} - prompt ${r.id}`)); }
        list.append(card(table, r, got.rows.length === 1));
      }
      if (got.rows.length > 10) list.append(pager());
      if (Object.keys(filtersOf(s)).length || s.page) container.querySelector(".filters").scrollIntoView();
    }).catch((e) => { list.textContent = "could not read the rows: " + e.message; });
  }

  // ---- sections ----------------------------------------------------------------------------------------------
  function funnelView(section) {
    const f = section.funnel;
    const rows = [el("tr", {}, el("th", {}, "step"), el("th", {}, "reason"), el("th", {}, "dropped"), el("th", {}, "remaining"), el("th", {}, ""))];
    rows.push(el("tr", {}, el("td", {}, "in"), el("td", {}), el("td", {}), el("td", { class: "num" }, fmt(f.rows_in)), el("td", {})));
    const max = Math.max(1, ...f.funnel.map((x) => x.dropped || 0));
    const idle = f.funnel.filter((x) => !x.dropped);
    for (const x of f.funnel.filter((y) => y.dropped)) {
      const reason = x.dropped ? link({ s: section.name, reason: x.reason }, x.reason, "reason-link") : el("span", { class: "muted" }, x.reason);
      rows.push(el("tr", {}, el("td", {}, x.step || x.filter || ""), el("td", {}, reason), el("td", { class: "num" }, fmt(x.dropped)),
        el("td", { class: "num" }, fmt(x.remaining)), el("td", {}, el("span", { class: "bar", style: "width:" + Math.round(120 * (x.dropped || 0) / max) + "px" }))));
    }
    rows.push(el("tr", {}, el("th", {}, "out"), el("td", {}), el("td", {}), el("th", { class: "num" }, fmt(f.rows_out)), el("td", {})));
    const quiet = idle.length ? el("details", {}, el("summary", { class: "muted" }, `${idle.length} checks dropped nothing`),
      el("p", { class: "muted" }, idle.map((x) => (x.step || x.filter || "") + ": " + x.reason).join(", "))) : null;
    return el("div", { class: "funnel-box" }, el("h2", {}, "Funnel of " + section.name),
      el("p", { class: "muted" }, "Each reason links to the rows it dropped."), el("table", { class: "grid funnel" }, rows), quiet);
  }
  function stageView(section, s) {
    const box = el("div", {});
    box.append(el("h1", {}, section.name), el("p", { class: "muted" }, `stage ${section.stage || "?"}, table ${section.kind || "untyped"}, ${fmt(section.rows)} rows` + (section.complete ? "" : " - INCOMPLETE: the stage has not finished")));
    if (section.shown_in) box.append(el("p", { class: "note" }, "Its rows are shown with their verdicts in ", link({ s: section.shown_in }, section.shown_in), "."));
    if (section.funnel) box.append(funnelView(section));
    if (section.config) box.append(el("details", {}, el("summary", {}, "config"), facts(Object.entries(section.config).map(([k, v]) => [k, typeof v === "object" && v !== null ? JSON.stringify(v) : v]))));
    MAIN.append(box);
    if (section.critique && s.t !== "pairs") box.append(el("p", {}, link({ s: section.name, t: "critique" }, "the critiques and revisions"), " - ", link({ s: section.name, t: "pairs" }, "the pairs")));
    const key = section.critique && s.t === "critique" ? section.critique : section.table;
    if (key) return tableView(box, DATA.tables[key], s);
    return Promise.resolve();
  }
  function trainView(section, s) {
    const box = el("div", {});
    box.append(el("h1", {}, section.name), el("p", { class: "muted" }, "training run" + (section.complete ? "" : " (not finished)")));
    append(box, [facts(Object.entries(section.figures)), plots(section.plots)]);
    MAIN.append(box);
    if (section.steps) box.append(el("h2", {}, "Rewards by step (every rollout)"), stepTable(section));
    if (section.table) {
      const table = DATA.tables[section.table];
      table.steps = (section.steps || []).map((x) => x.step);
      box.append(el("h2", {}, "Rollouts by step"));
      return tableView(box, table, s);
    }
    return Promise.resolve();
  }
  function stepTable(section) {
    const cols = Object.keys(section.steps[0]).filter((k) => k !== "step" && k !== "rows");
    const head = el("tr", {}, el("th", {}, "step"), el("th", {}, "rollouts"), cols.map((c) => el("th", {}, c + " (mean)")));
    const spark = el("tr", {}, el("td", {}), el("td", {}), cols.map((c) => el("td", {}, sparkline(section.steps.map((x) => x[c])))));
    const rows = section.steps.map((x) => el("tr", { class: "click", onclick: () => update({ step: String(x.step) }) },
      el("td", {}, link(Object.assign(state(), { step: x.step }), String(x.step))), el("td", { class: "num" }, fmt(x.rows)), cols.map((c) => el("td", { class: "num" }, fmt(x[c])))));
    return el("div", { style: "max-height: 320px; overflow: auto" }, el("table", { class: "grid" }, head, spark, rows));
  }
  function sparkline(values) {
    const ns = "http://www.w3.org/2000/svg", w = 120, h = 28;
    const nums = values.filter((v) => typeof v === "number");
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", w); svg.setAttribute("height", h); svg.setAttribute("class", "spark");
    if (nums.length < 2) return svg;
    const lo = Math.min(...nums), hi = Math.max(...nums), span = hi - lo || 1;
    const pts = values.map((v, i) => (typeof v === "number" ? `${(i * (w - 2)) / (values.length - 1) + 1},${h - 2 - ((v - lo) / span) * (h - 4)}` : null)).filter(Boolean);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.join(" ")); line.setAttribute("fill", "none"); line.setAttribute("stroke", "#2f5bd3"); line.setAttribute("stroke-width", "1.5");
    svg.append(line);
    return svg;
  }
  function plots(found) {
    const names = Object.keys(found || {});
    return names.length ? el("div", { class: "plots" }, names.map((n) => el("img", { src: found[n], alt: n, title: n }))) : null;
  }

  // ---- evaluations: per problem, its k samples; two evaluations side by side -------------------------------------
  const EVALS = DATA.sections.filter((x) => x.type === "eval");
  function solved(p) { return p && p.samples ? p.samples.filter((x) => x[2] === true).length / p.samples.length : null; }
  function evalView(section, s) {
    const other = s.b && SECTIONS[s.b] && s.b !== section.name ? SECTIONS[s.b] : null;
    const box = el("div", {});
    box.append(el("h1", {}, section.name), facts(Object.entries(section.scores).map(([k, v]) => [k, typeof v === "object" && v !== null ? JSON.stringify(v) : v])));
    if (Object.keys(section.protocol).length) box.append(el("details", {}, el("summary", {}, "protocol"), facts(Object.entries(section.protocol))));
    append(box, [plots(section.plots)]);
    const pick = el("select", { "data-filter": "b", onchange: (e) => update({ b: e.target.value, p: "" }) }, el("option", { value: "" }, "none"),
      EVALS.filter((x) => x.name !== section.name).map((x) => el("option", { value: x.name }, x.name)));
    pick.value = other ? other.name : "";
    const theirs = {};
    if (other) other.problems.forEach((p) => { theirs[p.id] = p; });
    const outcome = (p) => { const a = solved(p), b = solved(theirs[p.id]); return a === null || b === null ? "" : b > a ? "win" : b < a ? "loss" : "tie"; };
    const counts = { win: 0, loss: 0, tie: 0 };
    section.problems.forEach((p) => { const o = outcome(p); if (o) counts[o] += 1; });
    const show = el("select", { "data-filter": "show", onchange: (e) => update({ show: e.target.value }) },
      [["", "every problem"], ["missed", "at least one sample wrong"], ["none", "no sample right"], ...(other ? [["win", other.name + " better"], ["loss", other.name + " worse"], ["tie", "ties"]] : [])].map(([v, t]) => el("option", { value: v }, t)));
    show.value = s.show || "";
    box.append(el("div", { class: "filters" }, el("label", {}, "compare with", pick), el("label", {}, "problems", show),
      el("label", {}, "search", (() => { const i = el("input", { type: "search", value: s.q || "", "data-filter": "q" }); i.addEventListener("change", () => update({ q: i.value.trim() })); return i; })())));
    if (other) box.append(el("p", { class: "compare-line" }, `${other.name} vs ${section.name}, problem by problem (share of samples right): ${other.name} better on ${counts.win}, worse on ${counts.loss}, tied on ${counts.tie} problems.`));
    const keep = (p) => {
      const a = solved(p);
      if (s.show === "missed" && !(a < 1)) return false;
      if (s.show === "none" && a !== 0) return false;
      if (["win", "loss", "tie"].includes(s.show) && outcome(p) !== s.show) return false;
      if (s.q && !((p.id + " " + (p.problem || "")).toLowerCase().includes(s.q.toLowerCase()))) return false;
      return true;
    };
    const verdicts = (p) => el("span", {}, (p && p.samples ? p.samples : []).map((x) => el("span", { class: "badge " + (x[2] === true ? "ok" : x[2] === false ? "bad" : "warn"), title: "sample " + x[0] + ": " + (x[1] === null ? "no answer" : x[1]) }, x[2] === true ? "+" : x[2] === false ? "-" : "?")));
    const head = el("tr", {}, el("th", {}, "problem"), el("th", {}, "text"), el("th", {}, "gold"), el("th", {}, section.name), el("th", {}, "vote (cons@k)"), other ? [el("th", {}, other.name), el("th", {}, "")] : null);
    const body = section.problems.filter(keep).map((p) => el("tr", { class: "click" + (s.p === p.id ? " sel" : ""), "data-problem": p.id, onclick: () => update({ p: p.id }) },
      el("td", { class: "id" }, p.id), el("td", {}, short(p.problem, 90)), el("td", {}, p.answer ?? "-"),
      el("td", {}, `${p.correct ?? "?"}/${p.n ?? "?"} `, verdicts(p)),
      el("td", {}, p.majority_answer === undefined ? "-" : `${p.majority_answer ?? "none"} ${p.majority_correct ? "(right)" : "(wrong)"}`),
      other ? [el("td", {}, theirs[p.id] ? `${theirs[p.id].correct}/${theirs[p.id].n} ` : "-", verdicts(theirs[p.id])), el("td", {}, outcome(p))] : null));
    box.append(el("h2", {}, `Problems (${body.length} of ${section.problems.length})`), el("div", { style: "max-height: 420px; overflow: auto" }, el("table", { class: "grid problems" }, head, body)));
    MAIN.append(box);
    const chosen = section.problems.find((p) => p.id === s.p);
    if (chosen) box.append(problemView(chosen, section, other));
    return Promise.resolve();
  }
  function problemView(p, section, other) {
    const samplesOf = (sec) => {
      const table = sec.table ? DATA.tables[sec.table] : null;
      if (!table || !table.rows) return [el("p", { class: "muted" }, "no texts for this evaluation")];
      const idCol = table.columns.indexOf("id");
      const rows = table.rows.filter((r) => r[idCol] === p.id).map((r) => rowObject(table, r));
      if (!rows.length) return [el("p", { class: "muted" }, "the texts of this problem's samples are not in the page's sample (--rows)")];
      return rows.map((r) => card(table, r, false));
    };
    const box = el("div", { class: "problem", id: "problem" }, el("h2", {}, "Problem " + p.id), textBlock(p.problem), facts([["gold answer", p.answer], ["samples right", `${p.correct}/${p.n}`], ["majority answer", p.majority_answer], ["majority right", p.majority_correct]].filter(([, v]) => v !== undefined)));
    if (other) box.append(el("div", { class: "side" }, el("div", {}, el("h4", {}, section.name), samplesOf(section)), el("div", {}, el("h4", {}, other.name), samplesOf(other))));
    else append(box, samplesOf(section));
    return box;
  }

  // ---- overview: the funnels, the evaluations, the run's report ------------------------------------------------
  function overview() {
    const box = el("div", {});
    box.append(el("h1", {}, DATA.title), el("p", { class: "muted" }, DATA.path));
    for (const s of DATA.sections.filter((x) => x.funnel)) box.append(funnelView(s));
    if (EVALS.length) {
      const keys = ["pass@1", "pass@1_std", "cons@" + (EVALS[0].scores.k || "k"), "k", "n_problems"];
      box.append(el("h2", {}, "Evaluations"), el("table", { class: "grid" }, el("tr", {}, el("th", {}, "run"), keys.map((k) => el("th", {}, k))),
        EVALS.map((e) => el("tr", {}, el("td", {}, link({ s: e.name }, e.name)), keys.map((k) => el("td", { class: "num" }, fmt(e.scores[k])))))));
    }
    if (DATA.report) box.append(el("h2", {}, "The run's report"), markdown(DATA.report.markdown, DATA.report.images));
    MAIN.append(box);
    return Promise.resolve();
  }
  function inline(text) {  // **bold** and `code`, as text
    return text.split(/(\*\*[^*]+\*\*|`[^`]+`|\[[^\]]+\]\([^)]+\))/).map((part) => {
      if (/^\*\*[^*]+\*\*$/.test(part)) return el("strong", {}, part.slice(2, -2));
      if (/^`[^`]+`$/.test(part)) return el("code", {}, part.slice(1, -1));
      const a = /^\[([^\]]+)\]\(([^)]+)\)$/.exec(part);
      if (a) return el("span", { title: a[2] }, a[1]);
      return part;
    });
  }
  function markdown(text, images) {  // the report's own markdown: headings, tables, images, lists, paragraphs
    const box = el("div", { class: "md" });
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const img = /^!\[([^\]]*)\]\(([^)\s]+)\)\s*$/.exec(line.trim());
      if (/^#{1,6} /.test(line)) box.append(el("h" + Math.min(6, line.indexOf(" ") + 1), {}, inline(line.replace(/^#+ /, ""))));
      else if (img) box.append(images[img[2]] ? el("img", { src: images[img[2]], alt: img[1] }) : el("p", { class: "muted" }, "(image " + img[2] + " not found)"));
      else if (line.startsWith("|")) {
        const table = el("table", {});
        for (; i < lines.length && lines[i].startsWith("|"); i++) {
          if (/^\|[-:| ]+\|$/.test(lines[i])) continue;
          table.append(el("tr", {}, lines[i].slice(1, -1).split("|").map((c) => el("td", {}, inline(c.trim())))));
        }
        i -= 1;
        box.append(table);
      } else if (/^\s*- /.test(line)) box.append(el("li", {}, inline(line.replace(/^\s*- /, ""))));
      else if (line.trim()) box.append(el("p", {}, inline(line)));
    }
    return box;
  }

  // ---- navigation ----------------------------------------------------------------------------------------------
  function navigation(current) {
    NAV.textContent = "";
    const entry = (name, sub, params) => el("a", { href: "#" + encode(params), class: current === name ? "current" : null, "data-section": name }, name, el("span", { class: "sub" }, sub));
    if (DATA.sections.length > 1 || DATA.report) NAV.append(entry("", "overview, funnels, report", {}));
    NAV.lastChild && (NAV.lastChild.firstChild.textContent = "overview");
    for (const s of DATA.sections) {
      const sub = s.type === "eval" ? "evaluation" : s.type === "train" ? "training" + (s.table ? ", rollouts" : "") : `${s.stage || "stage"}, ${fmt(s.rows)} rows`;
      NAV.append(entry(s.name, sub, { s: s.name }));
    }
  }
  function render() {
    document.body.removeAttribute("data-ready");
    const s = state();
    const only = DATA.sections.length === 1 && !DATA.report ? DATA.sections[0].name : null;
    const section = SECTIONS[s.s || only || ""];
    navigation(section ? section.name : "");
    MAIN.textContent = "";
    document.body.classList.toggle("mathoff", !mathOn);
    let done;
    if (!section) done = overview();
    else if (section.type === "eval") done = evalView(section, s);
    else if (section.type === "train") done = trainView(section, s);
    else done = stageView(section, s);
    return done.then(() => {
      // after the frame that shows them is painted (a task queued from the frame's callback runs after it)
      requestAnimationFrame(() => setTimeout(() => { performance.mark("rk-rows"); document.body.setAttribute("data-ready", "1"); }, 0));
    });
  }
  document.getElementById("math-toggle").addEventListener("change", (e) => { mathOn = e.target.checked; render(); });
  window.addEventListener("hashchange", render);
  render();
})();
