"use strict";
// The review report's script: filters, search, pages and links over the data blocks of this
// file. A page of data is parsed the first time it is shown; a pair's texts are drawn the first
// time it is opened.
(() => {
  const PER_PAGE = 50; // items (clusters, pairs across clusters) per page shown
  const CONTEXT = 12; // equal words kept on each side of a change
  const LEAD = 40; // equal words shown of texts without a change
  const MIN_FOLD = 16; // fewer equal words than this are never folded
  const LIST_STEP = 100; // members and pairs of a cluster shown before "show more"
  const COLOURS = {
    exact: "#0072b2", minhash: "#009e73", simhash: "#e69f00",
    containment: "#cc79a7", confirmed: "#56b4e9",
  };
  const VERDICTS = { duplicate: "duplicate", not_duplicate: "not a duplicate" };

  const index = JSON.parse(document.getElementById("report-index").textContent);
  const METHODS = index.methods;
  const items = index.items; // [kind, key, page, size, [method, jaccard * 1000, ...]]
  const firstOfPage = [];
  items.forEach((item, i) => {
    if (firstOfPage[item[2]] === undefined) firstOfPage[item[2]] = i;
  });
  const parsed = new Map();
  let ids = null;

  const state = { methods: new Set(METHODS), lo: 0, hi: 1, query: "", found: null, page: 0 };
  let view = [];

  // -- data ------------------------------------------------------------------------------

  function dataPage(n) {
    if (!parsed.has(n)) {
      parsed.set(n, JSON.parse(document.getElementById("page-" + n).textContent));
    }
    return parsed.get(n);
  }

  function entry(i) {
    const page = items[i][2];
    return dataPage(page)[i - firstOfPage[page]];
  }

  function itemIds() {
    if (ids === null) ids = JSON.parse(document.getElementById("report-ids").textContent);
    return ids;
  }

  // -- filters ---------------------------------------------------------------------------

  function filtering() {
    return state.methods.size !== METHODS.length || state.lo > 0 || state.hi < 1;
  }

  function passes(method, jaccard) {
    if (!state.methods.has(method)) return false;
    if (jaccard === null || jaccard < 0) return true; // a confirmed pair without an edge
    return jaccard >= state.lo - 1e-9 && jaccard <= state.hi + 1e-9;
  }

  function itemPasses(i) {
    const flat = items[i][4];
    if (flat.length === 0) return !filtering();
    for (let k = 0; k < flat.length; k += 2) {
      if (passes(METHODS[flat[k]], flat[k + 1] < 0 ? -1 : flat[k + 1] / 1000)) return true;
    }
    return false;
  }

  function matches(id) {
    return state.query !== "" && id.toLowerCase().includes(state.query);
  }

  function search(query) {
    state.query = query.trim().toLowerCase();
    state.found = null;
    if (state.query === "") return;
    state.found = new Set();
    itemIds().forEach((list, i) => {
      if (list.some(matches)) state.found.add(i);
    });
  }

  function select() {
    view = [];
    for (let i = 0; i < items.length; i++) {
      if (itemPasses(i) && (state.found === null || state.found.has(i))) view.push(i);
    }
  }

  // -- elements --------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  function number(value, digits) {
    return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
  }

  function plural(count, word) {
    return count.toLocaleString("en") + " " + word + (count === 1 ? "" : "s");
  }

  function pairId(a, b) {
    return "pair-" + encodeURIComponent(a) + "--" + encodeURIComponent(b);
  }

  function badge(method) {
    return el("span", { class: "method", style: "--c:" + COLOURS[method] }, method);
  }

  function verdictBadge(verdict) {
    if (!verdict) return el("span", { class: "verdict undecided" }, "undecided");
    return el("span", { class: "verdict " + verdict[0] }, VERDICTS[verdict[0]] || verdict[0]);
  }

  function quoted(id) {
    return /^[\w.\/:@%+=,-]+$/.test(id) ? id : "'" + id.replace(/'/g, "'\\''") + "'";
  }

  function clusterLink(id) {
    const known = items.some((item) => item[0] === 0 && item[1] === id);
    return known ? el("a", { href: "#cluster-" + id }, "cluster " + id) : "a cluster of its own";
  }

  // -- clusters --------------------------------------------------------------------------

  function clusterCard(i) {
    const e = entry(i);
    const card = el("article", { class: "item cluster", id: "cluster-" + e.id, "data-cluster": e.id,
      "data-item": i });
    const shown = e.pairs.filter((p) => passes(p.m, p.j));
    card.append(el("h2", {},
      el("a", { href: "#cluster-" + e.id, class: "anchor" }, "Cluster " + e.id),
      el("span", { class: "count" },
        plural(e.members.length, "document") + " · " + plural(e.pairs.length, "pair"))));
    if (e.canonical !== null) {
      const how = e.chosen === "declared" ? "declared by a person" : "rule: " + e.chosen;
      card.append(el("p", { class: "canonical-line" }, "Canonical document ",
        el("b", {}, e.canonical), " (" + how + ")"));
    }
    card.append(membersTable(e.members));
    const head = el("h3", {}, "Pairs");
    if (shown.length < e.pairs.length) {
      head.append(el("span", { class: "count" },
        (e.pairs.length - shown.length) + " hidden by the filters"));
    }
    card.append(head, more(shown, (p) => pairDetails(p), "pairs", "div", { class: "pairs" }));
    return card;
  }

  function membersTable(members) {
    const table = el("table", { class: "members" },
      el("thead", {}, el("tr", {}, el("th", {}, "document"), el("th", {}, "stored"),
        el("th", { class: "num", title: "words of the canonical text: markup, punctuation and stop words left out" },
          "canonical words"), el("th", { class: "num" }, "length"))));
    const row = (m) => el("tr", { class: (m[4] ? "canonical " : "") + (matches(m[0]) ? "found" : "") },
      el("td", {}, el("span", { class: "id" }, m[0]),
        m[4] ? el("span", { class: "tag" }, "canonical") : null),
      el("td", {}, m[1]), el("td", { class: "num" }, m[3].toLocaleString("en")),
      el("td", { class: "num" }, m[2].toLocaleString("en")));
    table.append(more(members, row, "documents", "tbody", {}));
    return table;
  }

  // The first LIST_STEP of ``list`` drawn by ``draw`` into a new ``tag``, and a button that
  // draws the next ones.
  function more(list, draw, noun, tag, attrs) {
    const box = el(tag, attrs);
    let drawn = 0;
    const step = () => {
      list.slice(drawn, drawn + LIST_STEP).forEach((x) => box.append(draw(x)));
      drawn = Math.min(list.length, drawn + LIST_STEP);
      if (drawn < list.length) {
        const rest = list.length - drawn;
        const button = el("button", { type: "button", class: "more" },
          "show " + Math.min(rest, LIST_STEP) + " more of " + rest + " " + noun);
        button.addEventListener("click", () => { button.closest(".more-row").remove(); step(); });
        const cell = tag === "tbody" ? el("td", { colspan: 4 }, button) : button;
        box.append(el(tag === "tbody" ? "tr" : "div", { class: "more-row" }, cell));
      }
    };
    step();
    return box;
  }

  // -- pairs -----------------------------------------------------------------------------

  function pairCard(i) {
    const e = entry(i);
    const card = el("article", { class: "item across", "data-item": i });
    card.append(el("h2", {}, "Pair across clusters"));
    let why = "";
    if (e.v && e.v[0] === "not_duplicate") why = "Declared not a duplicate, so kept apart. ";
    else if (e.x) why = "Cut to keep " + e.x[0] + " and " + e.x[1] + " apart (declared not duplicates). ";
    else if (e.m === "containment") why = "An excerpt: excerpt matches do not merge clusters. ";
    card.append(el("p", { class: "why" }, why, el("span", { class: "id" }, e.a), " is in ",
      clusterLink(e.ca), ", ", el("span", { class: "id" }, e.b), " in ", clusterLink(e.cb), "."));
    card.append(pairDetails(e));
    return card;
  }

  function pairDetails(p) {
    const details = el("details", { class: "pair", id: pairId(p.a, p.b), "data-method": p.m,
      "data-jaccard": p.j === null ? "" : p.j });
    const found = matches(p.a) || matches(p.b);
    details.append(el("summary", { class: found ? "found" : null }, badge(p.m),
      el("span", { class: "ids" }, el("span", { class: "id" }, p.a), el("span", { class: "vs" }, " ⟷ "),
        el("span", { class: "id" }, p.b)),
      el("span", { class: "scores" }, p.j === null ? "no edge" : "J " + number(p.j, 3)),
      verdictBadge(p.v)));
    details.addEventListener("toggle", () => {
      if (details.open && !details.dataset.drawn) {
        details.dataset.drawn = "1";
        details.append(pairBody(p));
      }
    });
    return details;
  }

  function pairBody(p) {
    const body = el("div", { class: "pair-body" });
    const scores = [["method", p.m], ["Jaccard", number(p.j, 3)], ["containment", number(p.c, 3)],
      ["Hamming", p.h === null ? "–" : p.h], ["metadata score", number(p.ms, 3)], ["score", number(p.s, 3)]];
    body.append(el("dl", { class: "scores" }, ...scores.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])));
    body.append(verdictLine(p));
    if (p.v && p.v[4] && p.v[4].length) body.append(cutLine(p.v[4]));
    const own = p.x && ((p.x[0] === p.a && p.x[1] === p.b) || (p.x[0] === p.b && p.x[1] === p.a));
    if (p.x && !own) {
      body.append(el("div", { class: "cut-line" }, "This match was cut to keep ",
        el("a", { href: "#" + pairId(p.x[0], p.x[1]) }, p.x[0] + " and " + p.x[1]),
        " apart: a reviewer declared them not duplicates."));
    }
    body.append(texts(p));
    body.append(el("p", { class: "permalink" }, el("a", { href: "#" + pairId(p.a, p.b) }, "link to this pair")));
    return body;
  }

  function verdictLine(p) {
    const line = el("div", { class: "verdict-line" }, "Verdict: ", verdictBadge(p.v));
    if (p.v) {
      const [, note, by, at] = p.v;
      if (note) line.append(" ", el("q", {}, note));
      line.append(el("span", { class: "who" }, (by ? " by " + by : "") + " · " + at));
    } else {
      // the option before the ids, and "--" before an id that starts with "-" (it would be
      // read as an option)
      const dash = p.a.startsWith("-") || p.b.startsWith("-") ? "-- " : "";
      const cmd = "dedup-store review --duplicate " + dash + quoted(p.a) + " " + quoted(p.b);
      line.append(" · record one: ", el("code", {}, cmd), " (or ",
        el("code", {}, "--not-duplicate"), ")");
    }
    return line;
  }

  // the matches a "not duplicate" verdict cut to part its pair, each a link to its pair
  function cutLine(cut) {
    const line = el("div", { class: "cut-line" },
      "To part them, this verdict cut " + cut.length + (cut.length === 1 ? " match: " : " matches: "));
    cut.forEach(([a, b], i) => {
      if (i) line.append(", ");
      line.append(el("a", { href: "#" + pairId(a, b) }, a + " ⟷ " + b));
    });
    return line;
  }

  function texts(p) {
    if (p.t === "none") {
      return el("p", { class: "note" }, "Texts are not kept in this store, so this pair shows its scores only. ",
        "A store made with ", el("code", {}, "dedup-store init --keep-text"), " keeps them.");
    }
    if (p.t === "missing") {
      return el("p", { class: "note" }, "The store holds no text for one of these documents ",
        "(it was stored before the store kept texts).");
    }
    if (p.t === "budget") {
      return el("p", { class: "note" }, "Texts left out: the report reached its size budget (",
        el("code", {}, "--max-bytes"), "). ", el("code", {}, "dedup-store report --cluster " + quoted(p.a)),
        " writes this pair's cluster with its texts.");
    }
    return diffView(p);
  }

  // -- the side-by-side view -------------------------------------------------------------

  // Words as the alignment counts them: runs of letters, digits and marks, and each Han,
  // Hiragana or Katakana character alone.
  const KANA_HAN = "\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}";
  const WORD = new RegExp(`[${KANA_HAN}]|(?:(?![${KANA_HAN}])[\\p{L}\\p{N}\\p{M}])+`, "gu");

  function wordStarts(text) {
    const starts = [];
    for (const m of text.matchAll(WORD)) starts.push(m.index);
    return starts;
  }

  function diffView(p) {
    const box = el("div", { class: "diff-box" });
    box.append(el("p", { class: "legend" }, el("del", {}, "deleted from a"), " ", el("ins", {}, "inserted in b"),
      " · text a " + plural(p.wa, "word") + ", text b " + plural(p.wb, "word") + " (as shown, stop words included), " +
      p.sh.toLocaleString("en") + " shared"));
    if (p.tr) {
      box.append(el("p", { class: "note" }, "Long texts: the view stops after the first " +
        plural(index.max_words, "word") + " of each text."));
    }
    const grid = el("div", { class: "diff" },
      el("div", { class: "col-head" }, "a · ", el("span", { class: "id" }, p.a)),
      el("div", { class: "col-head" }, "b · ", el("span", { class: "id" }, p.b)));
    let left = [], right = [];
    const flush = () => {
      if (left.length || right.length) {
        grid.append(el("div", { class: "cell a" }, ...left), el("div", { class: "cell b" }, ...right));
      }
      left = []; right = [];
    };
    const segments = p.d;
    segments.forEach((s, k) => {
      if (s[0] === 1) { left.push(el("del", {}, s[1])); right.push(el("ins", {}, s[2])); return; }
      if (s[0] === 2) { left.push(el("del", {}, s[1])); return; }
      if (s[0] === 3) { right.push(el("ins", {}, s[1])); return; }
      const a = s[1], b = s.length > 2 ? s[2] : s[1];
      const fold = folding(a, b, k === 0, k === segments.length - 1);
      if (fold === null) { left.push(a); right.push(b); return; }
      if (fold.a[0] || fold.b[0]) { left.push(fold.a[0]); right.push(fold.b[0]); }
      flush();
      grid.append(foldButton(fold));
      if (fold.a[2] || fold.b[2]) { left.push(fold.a[2]); right.push(fold.b[2]); }
    });
    flush();
    box.append(grid);
    return box;
  }

  // Where a run of equal words folds: ``{a: [head, middle, tail], b: [...], words}``, or null.
  function folding(a, b, first, last) {
    let head = first ? 0 : CONTEXT, tail = last ? 0 : CONTEXT;
    if (first && last) head = LEAD;
    // the fold starts and ends where a space does, so it never cuts through "Upstream-Contact"
    const cut = (text) => {
      const starts = wordStarts(text);
      if (starts.length - head - tail < MIN_FOLD) return null;
      let i = head === 0 ? 0 : starts[head];
      let j = tail === 0 ? text.length : starts[starts.length - tail];
      while (i > 0 && !/\s/.test(text[i - 1])) i--;
      while (j < text.length && j > i && !/\s/.test(text[j - 1])) j--;
      const middle = text.slice(i, j);
      return [text.slice(0, i), middle, text.slice(j), wordStarts(middle).length];
    };
    const ca = cut(a), cb = cut(b);
    if (ca === null || cb === null || ca[3] < MIN_FOLD) return null;
    return { a: ca, b: cb, words: ca[3] };
  }

  function foldButton(fold) {
    const button = el("button", { type: "button", class: "fold" }, "show " + plural(fold.words, "equal word"));
    button.addEventListener("click", () => {
      button.replaceWith(el("div", { class: "cell a unfolded" }, fold.a[1]),
        el("div", { class: "cell b unfolded" }, fold.b[1]));
    });
    return button;
  }

  // -- page ------------------------------------------------------------------------------

  function render() {
    const pages = Math.max(1, Math.ceil(view.length / PER_PAGE));
    state.page = Math.max(0, Math.min(state.page, pages - 1));
    const box = document.getElementById("items");
    box.replaceChildren();
    const start = state.page * PER_PAGE;
    for (const i of view.slice(start, start + PER_PAGE)) {
      box.append(items[i][0] === 0 ? clusterCard(i) : pairCard(i));
    }
    document.getElementById("status").textContent = statusText(start);
    document.querySelectorAll(".pager").forEach((nav) => pager(nav, pages));
  }

  function statusText(start) {
    const count = (list) => {
      const clusters = list.filter((i) => items[i][0] === 0).length;
      const across = list.length - clusters;
      return plural(clusters, "cluster") + (across ? " and " + plural(across, "pair") + " across clusters" : "");
    };
    let text = count(view);
    if (filtering() || state.found !== null) {
      text += (view.length === 1 ? " matches" : " match") + " (of " + count(items.map((_, i) => i)) + ")";
    }
    if (view.length === 0) return text + ". Nothing to show: change the filters or the search.";
    const end = Math.min(view.length, start + PER_PAGE);
    return text + "; showing " + (start + 1) + "–" + end + ".";
  }

  function pager(nav, pages) {
    nav.replaceChildren();
    if (pages < 2) return;
    const go = (page) => { state.page = page; render(); window.scrollTo(0, document.getElementById("review").offsetTop); };
    const prev = el("button", { type: "button", disabled: state.page === 0 ? "" : null }, "‹ previous");
    prev.addEventListener("click", () => go(state.page - 1));
    const next = el("button", { type: "button", disabled: state.page === pages - 1 ? "" : null }, "next ›");
    next.addEventListener("click", () => go(state.page + 1));
    const input = el("input", { type: "number", min: 1, max: pages, value: state.page + 1, "aria-label": "page" });
    input.addEventListener("change", () => go(Math.max(0, Math.min(pages - 1, Number(input.value) - 1))));
    nav.append(prev, el("label", {}, "page ", input, " of " + pages), next);
  }

  function update() {
    select();
    state.page = 0;
    render();
  }

  // -- links -----------------------------------------------------------------------------

  function target() {
    let hash;
    try {
      hash = decodeURIComponent(location.hash.slice(1));
    } catch (e) {
      return null;
    }
    if (hash.startsWith("cluster-")) {
      const key = Number(hash.slice(8));
      const i = items.findIndex((item) => item[0] === 0 && item[1] === key);
      return i < 0 ? null : { item: i, id: "cluster-" + key };
    }
    if (!hash.startsWith("pair-")) return null;
    const rest = hash.slice(5);
    for (let k = rest.indexOf("--"); k >= 0; k = rest.indexOf("--", k + 1)) {
      const a = rest.slice(0, k), b = rest.slice(k + 2);
      for (const [x, y] of [[a, b], [b, a]]) {
        const i = pairItem(x, y);
        if (i >= 0) return { item: i, id: pairId(x, y) };
      }
    }
    return null;
  }

  function pairItem(a, b) {
    const all = itemIds();
    for (let i = 0; i < all.length; i++) {
      if (!all[i].includes(a) || !all[i].includes(b)) continue;
      const e = entry(i);
      if (items[i][0] === 1 ? e.a === a && e.b === b : e.pairs.some((p) => p.a === a && p.b === b)) return i;
    }
    return -1;
  }

  function follow() {
    const found = target();
    if (found === null) return;
    if (!view.includes(found.item) || !shownPair(found)) reset();
    state.page = Math.floor(view.indexOf(found.item) / PER_PAGE);
    render();
    const card = document.querySelector('[data-item="' + found.item + '"]');
    let node;
    while ((node = document.getElementById(found.id)) === null) {
      const button = card === null ? null : card.querySelector(".pairs > .more-row button");
      if (button === null) return;
      button.click();
    }
    if (node.tagName === "DETAILS") node.open = true;
    node.classList.add("target");
    node.scrollIntoView({ block: "start" });
  }

  function shownPair(found) {
    if (!found.id.startsWith("pair-")) return true;
    const e = entry(found.item);
    const list = items[found.item][0] === 1 ? [e] : e.pairs;
    return list.some((p) => pairId(p.a, p.b) === found.id && passes(p.m, p.j));
  }

  function reset() {
    state.methods = new Set(METHODS);
    state.lo = 0; state.hi = 1;
    search("");
    document.getElementById("search").value = "";
    document.getElementById("sim-min").value = "0";
    document.getElementById("sim-max").value = "1";
    document.querySelectorAll("#methods input").forEach((box) => { box.checked = true; });
    select();
  }

  // -- controls --------------------------------------------------------------------------

  function setup() {
    const counts = new Map(METHODS.map((m) => [m, 0]));
    for (const item of items) for (let k = 0; k < item[4].length; k += 2) {
      const m = METHODS[item[4][k]];
      counts.set(m, counts.get(m) + 1);
    }
    const box = document.getElementById("methods");
    for (const m of METHODS) {
      if (counts.get(m) === 0) continue;
      const input = el("input", { type: "checkbox", name: "method", value: m, checked: "" });
      input.addEventListener("change", () => {
        if (input.checked) state.methods.add(m); else state.methods.delete(m);
        update();
      });
      box.append(el("label", { class: "check" }, input, badge(m), " " + counts.get(m).toLocaleString("en")));
    }
    const range = (id, key) => {
      const input = document.getElementById(id);
      input.addEventListener("input", () => {
        const value = Number(input.value);
        if (input.value !== "" && !Number.isNaN(value)) { state[key] = Math.max(0, Math.min(1, value)); update(); }
      });
    };
    range("sim-min", "lo");
    range("sim-max", "hi");
    let timer = null;
    const searchBox = document.getElementById("search");
    searchBox.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => { search(searchBox.value); update(); }, 120);
    });
    document.getElementById("reset").addEventListener("click", () => { reset(); state.page = 0; render(); });
    if (index.over_budget > 0) {
      const note = document.getElementById("budget-note");
      note.textContent = plural(index.over_budget, "pair") + " show their scores only: the report reached its size budget of " +
        (index.max_bytes / 1048576).toFixed(0) + " MB (--max-bytes). The report of one cluster (--cluster ID) shows its texts.";
      note.hidden = false;
    }
    window.addEventListener("hashchange", follow);
  }

  setup();
  select();
  render();
  follow();
})();
