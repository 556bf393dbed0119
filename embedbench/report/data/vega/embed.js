/* embedbench's page script (docs/interactive.md): render every .eb-view's Vega-Lite spec
   with the vega-embed build inlined above it, keep the figure's PNG (and its alt text)
   under the chart, and carry a click on a worker or a block (or a case of the work charts)
   from one chart to the others: the same selection, and the other charts' case and length
   menus set to that case.
   Nothing is fetched: the specs hold their data. */
(function () {
  "use strict";
  var LINKED = ["worker_pick_store", "block_pick_store", "op_pick_store"];
  var OPTIONS = {
    mode: "vega-lite",
    renderer: "svg",
    actions: { export: true, source: false, compiled: false, editor: false },
  };
  var views = [];
  var syncing = {}; // per selection: a pick's own echo from the other charts is not sent back
  window.embedbenchViews = views;

  function has(view, name) {
    try {
      view.data(name);
      return true;
    } catch (error) {
      return false;
    }
  }

  function hasSignal(view, name) {
    try {
      view.signal(name);
      return true;
    } catch (error) {
      return false;
    }
  }

  function pickedCase(tuples) {
    // A block's pick holds [case, tokens, block]: the menus of the other charts follow it.
    for (var i = 0; i < tuples.length; i++) {
      var fields = (tuples[i].fields || []).map(function (f) { return f.field; });
      var at = fields.indexOf("case");
      if (at >= 0) {
        return { case: tuples[i].values[at], tokens: tuples[i].values[fields.indexOf("tokens")] };
      }
    }
    return null;
  }

  function propagate(source, name, tuples) {
    if (syncing[name]) return;
    syncing[name] = true;
    var picked = pickedCase(tuples || []);
    var runs = views
      .filter(function (view) { return view !== source && has(view, name); })
      .map(function (view) {
        if (picked && hasSignal(view, "sel_case")) {
          view.signal("sel_case", picked.case).signal("sel_tokens", picked.tokens);
        }
        view.data(name, (tuples || []).map(function (t) { return Object.assign({}, t); }));
        return view.runAsync();
      });
    Promise.all(runs).finally(function () { syncing[name] = false; });
  }

  function keepImage(figure) {
    var img = figure.querySelector(":scope > img");
    if (!img) return;
    var details = document.createElement("details");
    details.className = "eb-static";
    var summary = document.createElement("summary");
    summary.textContent = "Static figure (PNG)";
    details.appendChild(summary);
    details.appendChild(img);
    figure.appendChild(details);
  }

  function render(figure) {
    var spec = JSON.parse(figure.querySelector("script.eb-spec").textContent);
    return vegaEmbed(figure.querySelector(".eb-chart"), spec, OPTIONS).then(function (result) {
      views.push(result.view);
      LINKED.forEach(function (name) {
        if (has(result.view, name)) {
          result.view.addDataListener(name, function (_, tuples) {
            propagate(result.view, name, tuples);
          });
        }
      });
      keepImage(figure);
      figure.classList.add("eb-rendered");
    });
  }

  function start() {
    var figures = Array.prototype.slice.call(document.querySelectorAll(".eb-view"));
    Promise.all(figures.map(render)).then(
      function () { document.body.setAttribute("data-eb-charts", String(views.length)); },
      function (error) {
        document.body.setAttribute("data-eb-charts", "failed");
        throw error;
      }
    );
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
