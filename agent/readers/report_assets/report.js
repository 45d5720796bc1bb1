// pesflow report: inlined into the page by agent/report.py. Reads the JSON data block and
// fills the detail panel for the chosen candidate; the tree and the chart are static SVG.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("pesflow-data").textContent);
  var byId = {};
  data.candidates.forEach(function (c) { byId[c.id] = c; });

  function $(id) { return document.getElementById(id); }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }
  function text(el, s) { clear(el); el.appendChild(document.createTextNode(s)); }
  function fmt(v) {
    if (v === null || v === undefined || v === "") return "-";
    if (typeof v === "number") return Math.abs(v) >= 100 ? v.toFixed(1) : String(Math.round(v * 10000) / 10000);
    return String(v);
  }

  function badge(label, cls) {
    var b = document.createElement("span");
    b.className = "badge " + (cls || "");
    b.textContent = label;
    return b;
  }

  function metaRow(table, key, value, linkId) {
    var tr = document.createElement("tr");
    var th = document.createElement("th");
    th.textContent = key;
    var td = document.createElement("td");
    if (linkId) {
      var a = document.createElement("a");
      a.textContent = value;
      a.setAttribute("data-go", linkId);
      a.addEventListener("click", function () { select(linkId, false); });
      td.appendChild(a);
    } else {
      td.textContent = value;
    }
    tr.appendChild(th);
    tr.appendChild(td);
    table.appendChild(tr);
  }

  // Each diff line in its own span, coloured by what it is.
  function renderDiff(pre, diff) {
    clear(pre);
    if (!diff) {
      pre.appendChild(document.createTextNode("(no diff: the unchanged code, or no files were recorded)"));
      return;
    }
    var lines = diff.replace(/\n$/, "").split("\n");
    var frag = document.createDocumentFragment();
    lines.forEach(function (line) {
      var s = document.createElement("span");
      if (line.indexOf("+++") === 0 || line.indexOf("---") === 0 || line.indexOf("diff ") === 0) s.className = "file";
      else if (line.charAt(0) === "+") s.className = "add";
      else if (line.charAt(0) === "-") s.className = "del";
      else if (line.indexOf("@@") === 0) s.className = "hunk";
      s.textContent = line === "" ? " " : line;
      frag.appendChild(s);
    });
    pre.appendChild(frag);
  }

  // The chosen node, and the path from it up to the root, are highlighted in the tree.
  function markTree(id) {
    var nodes = document.querySelectorAll("#tree .node");
    for (var i = 0; i < nodes.length; i++) {
      nodes[i].classList.toggle("selected", nodes[i].getAttribute("data-id") === id);
    }
    var lineage = {};
    for (var c = byId[id]; c && c.parent; c = byId[c.parent]) lineage[c.id] = true;
    var edges = document.querySelectorAll("#tree .edge");
    for (var j = 0; j < edges.length; j++) {
      edges[j].classList.toggle("lineage", !!lineage[edges[j].getAttribute("data-child")]);
    }
    var rows = document.querySelectorAll("#cand-table tbody tr");
    for (var k = 0; k < rows.length; k++) {
      rows[k].classList.toggle("selected", rows[k].getAttribute("data-id") === id);
    }
  }

  // Scroll the tree's own box (never the page) so that the node sits in its middle.
  function centreInTree(id) {
    var box = $("tree"), nodes = box.querySelectorAll(".node"), node = null;
    for (var i = 0; i < nodes.length; i++) if (nodes[i].getAttribute("data-id") === id) node = nodes[i];
    if (!node) return;
    var n = node.getBoundingClientRect(), b = box.getBoundingClientRect();
    box.scrollLeft += (n.left + n.width / 2) - (b.left + b.width / 2);
    box.scrollTop += (n.top + n.height / 2) - (b.top + b.height / 2);
  }

  function select(id, scroll) {
    var c = byId[id];
    if (!c) return;
    text($("detail-title"), c.id);
    var badges = $("detail-badges");
    clear(badges);
    badges.appendChild(badge(data.kind_label[c.kind] || c.kind, "k-" + c.kind));
    if (c.best) badges.appendChild(badge("final pick", "best"));
    if (c.duplicate_of) badges.appendChild(badge("same code as " + c.duplicate_of));
    var meta = $("detail-meta");
    clear(meta);
    metaRow(meta, "round", fmt(c.round));
    metaRow(meta, "island", fmt(c.island));
    metaRow(meta, "parent", c.parent || "none (a root)", c.parent || null);
    metaRow(meta, "status", c.status);
    var counted = c.counts !== false;  // a suspect's figures are the grader's claim, not a result
    metaRow(meta, "speedup", c.speedup === null ? "-" : fmt(c.speedup) + "x" + (counted ? "" : " (claimed; not counted)"));
    metaRow(meta, "reward", counted ? fmt(c.reward) : "- (not counted)");
    var trust = c.trust || {};
    if (trust.reasons && trust.reasons.length) metaRow(meta, "trust", trust.reasons.join("; "));
    if (trust.review) metaRow(meta, "review", trust.review.decision + "ed: " + (trust.review.why || ""));
    metaRow(meta, "tests", c.tests && c.tests[1] ? c.tests[0] + " / " + c.tests[1] + " passed" : "-");
    metaRow(meta, "hard fails", c.reasons && c.reasons.length ? c.reasons.join(", ") : "none");
    if (c.verdict && c.verdict.grader) metaRow(meta, "grader", c.verdict.grader + (c.verdict.seconds ? " · " + fmt(c.verdict.seconds) + " s" : ""));
    if (c.duplicate_of) metaRow(meta, "original", c.duplicate_of, c.duplicate_of);
    text($("detail-verdict"), (c.verdict && c.verdict.message) || "(no verdict message recorded)");
    text($("detail-plan"), c.plan || "(none recorded)");
    text($("detail-lessons"), c.lessons || "(none recorded)");
    text($("detail-diff-source"), c.diff_source === "computed" ? "(computed from the recorded files)" :
      c.diff_source === "recorded" ? "(as recorded)" : "");
    renderDiff($("detail-diff"), c.diff);
    markTree(id);
    centreInTree(id);
    if (scroll && $("detail").scrollIntoView) $("detail").scrollIntoView({ block: "start" });
    // A link to the chosen candidate; some browsers refuse this for file:// pages, which is fine.
    try { history.replaceState(null, "", "#" + encodeURIComponent(id)); } catch (e) { /* not needed to work */ }
  }

  var nodes = document.querySelectorAll("#tree .node");
  for (var i = 0; i < nodes.length; i++) {
    (function (g) {
      var id = g.getAttribute("data-id");
      g.addEventListener("click", function () { select(id, false); });
      g.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(id, false); }
      });
    })(nodes[i]);
  }
  var rows = document.querySelectorAll("#cand-table tbody tr");
  for (var r = 0; r < rows.length; r++) {
    (function (tr) {
      tr.addEventListener("click", function () { select(tr.getAttribute("data-id"), true); });
    })(rows[r]);
  }

  var fromHash = decodeURIComponent((location.hash || "").slice(1));
  var first = byId[fromHash] ? fromHash : (data.best_id && byId[data.best_id] ? data.best_id :
    (data.candidates.length ? data.candidates[0].id : null));
  if (first) select(first, false);
  document.body.setAttribute("data-ready", "1");
})();
