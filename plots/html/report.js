// report.html's filters and sortable tables (plots/html/page.py inlines this file). Plotly draws every chart; this
// only chooses which of each trace's points it is given, redraws the headline frontier over the points shown (the
// rule of plots/headline.py's `frontier`), and hides the table rows of the points filtered out.
(function () {
  "use strict";
  // Result row id -> its value per filter (model, backend, hardware, lengths).
  const rows = JSON.parse(document.getElementById("report-rows").textContent);
  const charts = Array.from(document.querySelectorAll(".plotly-graph-div"));
  const FIELDS = ["x", "y", "text", "hovertext", "customdata"];
  const original = new Map();  // chart -> its traces' points as first drawn

  function remember() {
    charts.forEach(function (gd) {
      original.set(gd, gd.data.map(function (trace) {
        const copy = {meta: trace.meta};
        FIELDS.forEach(function (f) { copy[f] = Array.from(trace[f] || []); });
        return copy;
      }));
    });
  }

  // The ids of the rows every filter keeps.
  function shownIds() {
    const allowed = Array.from(document.querySelectorAll("#filters fieldset")).map(function (set) {
      const values = Array.from(set.querySelectorAll("input:checked")).map(function (box) { return box.value; });
      return [set.dataset.key, new Set(values)];
    });
    return new Set(Object.keys(rows).filter(function (id) {
      return allowed.every(function (pair) { return pair[1].has(rows[id][pair[0]]); });
    }).map(Number));
  }

  // No other shown point is both faster per user (x) and more per GPU (y); slowest per user first.
  function frontier(points) {
    const byX = points.slice().sort(function (a, b) { return b.x - a.x || b.y - a.y; });
    let best = -Infinity;
    return byX.filter(function (p) { const keep = p.y > best; best = Math.max(best, p.y); return keep; }).reverse();
  }

  // The latency chart's rule (plots/data.py's pareto_frontier): no other shown point has both a lower latency (x)
  // and a higher throughput (y); fastest first.
  function latencyFrontier(points) {
    const byX = points.slice().sort(function (a, b) { return a.x - b.x || b.y - a.y; });
    let best = -Infinity;
    return byX.filter(function (p) { const keep = p.y > best; best = Math.max(best, p.y); return keep; });
  }

  function filterChart(gd, ids) {
    const traces = original.get(gd);
    const update = {};
    FIELDS.forEach(function (f) { update[f] = []; });
    const shown = [];  // every series point kept: the frontier's candidates
    traces.forEach(function (trace) {
      const keep = trace.customdata.map(function (id) { return ids.has(id); });
      FIELDS.forEach(function (f) { update[f].push(trace[f].filter(function (_, j) { return keep[j]; })); });
      if (trace.meta === "series") {
        trace.customdata.forEach(function (id, j) { if (keep[j]) shown.push({x: trace.x[j], y: trace.y[j], id: id}); });
      }
    });
    traces.forEach(function (trace, i) {
      if (trace.meta !== "frontier" && trace.meta !== "latency-frontier") return;
      const front = trace.meta === "frontier" ? frontier(shown) : latencyFrontier(shown);
      update.x[i] = front.map(function (p) { return p.x; });
      update.y[i] = front.map(function (p) { return p.y; });
      update.customdata[i] = front.map(function (p) { return p.id; });
      update.text[i] = update.hovertext[i] = front.map(function () { return ""; });
    });
    const figure = gd.closest(".figure");
    const wasHidden = figure.hidden;
    figure.hidden = shown.length === 0;  // a chart with no point left (a length filtered out) goes
    return Plotly.restyle(gd, update, traces.map(function (_, i) { return i; })).then(function () {
      if (wasHidden && !figure.hidden) return Plotly.Plots.resize(gd);
    });
  }

  function applyFilters() {
    const ids = shownIds();
    document.querySelectorAll("tr[data-ids]").forEach(function (tr) {
      tr.hidden = !tr.dataset.ids.split(" ").some(function (id) { return ids.has(Number(id)); });
    });
    document.getElementById("shown-count").textContent =
      ids.size + " of " + Object.keys(rows).length + " result rows shown";
    return Promise.all(charts.map(function (gd) { return filterChart(gd, ids); }));
  }

  // Sort a table's body by the clicked column: numbers by `data-v` (a cell without a number last), text otherwise.
  function sortBy(th) {
    const table = th.closest("table");
    const column = th.cellIndex;
    const ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const key = function (tr) {
      const cell = tr.cells[column];
      return cell.dataset.v === undefined ? cell.textContent : (cell.dataset.v === "" ? NaN : Number(cell.dataset.v));
    };
    const compare = function (a, b) {
      const x = key(a), y = key(b);
      if (typeof x === "number" && typeof y === "number") {
        if (isNaN(x) || isNaN(y)) return isNaN(x) - isNaN(y);  // blanks last either way
        return ascending ? x - y : y - x;
      }
      const order = String(x).localeCompare(String(y), undefined, {numeric: true});
      return ascending ? order : -order;
    };
    const body = table.tBodies[0];
    Array.from(body.rows).sort(compare).forEach(function (tr) { body.appendChild(tr); });
  }

  function start() {
    remember();
    document.getElementById("filters").addEventListener("change", applyFilters);
    document.getElementById("filters-reset").addEventListener("click", function () {
      document.querySelectorAll("#filters input").forEach(function (box) { box.checked = true; });
      applyFilters();
    });
    document.querySelectorAll("table.sortable th").forEach(function (th) {
      th.addEventListener("click", function () { sortBy(th); });
    });
    document.getElementById("shown-count").textContent =
      Object.keys(rows).length + " of " + Object.keys(rows).length + " result rows shown";
    document.body.dataset.ready = "true";  // the browser test waits for this
  }

  window.reportFilters = {apply: applyFilters};
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
